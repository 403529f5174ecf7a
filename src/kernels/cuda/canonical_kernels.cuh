// Canonical kernels (numerics spec v1): see canonical.cu for the launchers.
//
// Device code only (no CUDA runtime calls), in an anonymous namespace: included by the
// launcher .cu file and, compiled as plain C++ under DETINFER_CUDA_EMULATION, by the CPU
// emulation test (tests/cuda/cuda_emulation_test.cpp), which runs these very kernels
// thread by thread on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace detinfer::kernels::cuda {
namespace {

__global__ void exp_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    y[i] = dm::exp_f32(x[i]);
}

__global__ void log_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    y[i] = dm::log_f32(x[i]);
}

__global__ void silu_mul_kernel(const float* g, const float* u, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = dm::div_rn(g[i], 1.0f + dm::exp_f32(-g[i])) * u[i];
}

__global__ void add_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

// One block per new token.
// K/V as the pool stores them (numerics spec, KV storage): f32 as is, bf16/f16 rounded to
// nearest even and stored as 2-byte bit patterns, as kernels::store_as_dtype on the CPU.
__device__ __forceinline__ void store_kv(float x, void* pool, std::int64_t i,
                                         core::DType kv_dtype) {
  if (kv_dtype == core::DType::kBF16) {
    static_cast<std::uint16_t*>(pool)[i] = dm::f32_to_bf16(x);
  } else if (kv_dtype == core::DType::kF16) {
    static_cast<std::uint16_t*>(pool)[i] = dm::f32_to_f16(x);
  } else {
    static_cast<float*>(pool)[i] = x;
  }
}

__global__ void kv_write_kernel(const float* k, const float* v, std::int64_t ld,
                                std::int64_t start_pos, const std::int32_t* block_table,
                                std::int64_t block_size, std::int64_t kv_stride, void* k_pool,
                                void* v_pool, core::DType kv_dtype) {
  const std::int64_t pos = start_pos + blockIdx.x;
  const std::int64_t row =
      std::int64_t{block_table[pos / block_size]} * block_size + pos % block_size;
  const float* kr = k + blockIdx.x * ld;
  const float* vr = v + blockIdx.x * ld;
  for (std::int64_t i = threadIdx.x; i < kv_stride; i += blockDim.x) {
    store_kv(kr[i], k_pool, row * kv_stride + i, kv_dtype);
    store_kv(vr[i], v_pool, row * kv_stride + i, kv_dtype);
  }
}

template <core::DType D>
__device__ __forceinline__ float widen(const void* p, std::int64_t i) {
  if constexpr (D == core::DType::kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (D == core::DType::kBF16) {
    return dm::bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  } else {
    return dm::f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  }
}

// --- linear ----------------------------------------------------------------------------
// One warp per output column j. The K axis is walked in groups of 32 spec chunks (2048
// values): the warp stages W[j][group] in shared memory (widened), lane l computes the
// partial of chunk l of the group for up to kRows rows of x, and lane 0 folds the 32
// partials into the running sums in chunk order. W is read once per kRows rows.
constexpr int kLinWarps = 4;
constexpr int kLinRows = 8;
constexpr int kGroupK = 32 * kChunk;

// Values per 16-byte vector of stored weights.
template <core::DType D>
inline constexpr int kVecElems = D == core::DType::kF32 ? 4 : 8;

// The 8 (or 4) weights of one 16-byte vector, widened.
template <core::DType D>
__device__ __forceinline__ void unpack(const uint4 raw, float* out) {
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  for (int i = 0; i < 4; ++i) {
    if constexpr (D == core::DType::kF32) {
      out[i] = dm::from_bits(words[i]);
    } else if constexpr (D == core::DType::kBF16) {
      out[2 * i] = dm::bf16_to_f32(static_cast<std::uint16_t>(words[i] & 0xffffu));
      out[2 * i + 1] = dm::bf16_to_f32(static_cast<std::uint16_t>(words[i] >> 16));
    } else {
      out[2 * i] = dm::f16_to_f32(static_cast<std::uint16_t>(words[i] & 0xffffu));
      out[2 * i + 1] = dm::f16_to_f32(static_cast<std::uint16_t>(words[i] >> 16));
    }
  }
}

// Copies W[row_off + g0 .. + kGroupK) (zeros past k) widened into the warp's staging
// tile: wl[c][i] = W[g0 + c*64 + i]. With `vec` (16-byte aligned rows: k a multiple of
// kVecElems and an aligned base) each lane loads whole 16-byte vectors; the values stored
// are the same either way.
template <core::DType D>
__device__ __forceinline__ void stage_group(const void* w, std::int64_t row_off, std::int64_t k,
                                            std::int64_t g0, bool vec, int lane,
                                            float (*wl)[kChunk + 1]) {
  if (vec) {
    constexpr int kV = kVecElems<D>;
    constexpr std::int64_t kBytes = D == core::DType::kF32 ? 4 : 2;
    const char* base = static_cast<const char*>(w) + (row_off + g0) * kBytes;
    for (int e = lane * kV; e < kGroupK; e += 32 * kV) {
      float vals[kV];
      if (g0 + e < k) {
        unpack<D>(*reinterpret_cast<const uint4*>(base + e * kBytes), vals);
      } else {
        for (float& v : vals) v = 0.0f;
      }
      for (int u = 0; u < kV; ++u) wl[e / kChunk][e % kChunk + u] = vals[u];
    }
    return;
  }
  for (int e = lane; e < kGroupK; e += 32) {
    const std::int64_t kk = g0 + e;
    wl[e / kChunk][e % kChunk] = kk < k ? widen<D>(w, row_off + kk) : 0.0f;
  }
}

template <core::DType D>
__global__ void __launch_bounds__(kLinWarps * 32)
    linear_kernel(const float* __restrict__ x, std::int64_t ldx, std::int64_t m,
                  const void* __restrict__ w, std::int64_t n, std::int64_t k,
                  const float* __restrict__ bias, float* __restrict__ y, std::int64_t ldy,
                  bool vec) {
  __shared__ float ws[kLinWarps][32][kChunk + 1];  // +1: conflict-free rows and columns
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  const std::int64_t j = std::int64_t{blockIdx.x} * kLinWarps + warp;
  if (j >= n) return;  // whole warps exit; only __syncwarp is used below
  float(*wl)[kChunk + 1] = ws[warp];
  for (std::int64_t r0 = 0; r0 < m; r0 += kLinRows) {
    const int rows = static_cast<int>(dmin(kLinRows, m - r0));
    float s[kLinRows];
    for (int r = 0; r < kLinRows; ++r) s[r] = 0.0f;
    for (std::int64_t g0 = 0; g0 < k; g0 += kGroupK) {
      __syncwarp();
      stage_group<D>(w, j * k, k, g0, vec, lane, wl);
      __syncwarp();
      const std::int64_t c0 = g0 + std::int64_t{lane} * kChunk;
      const int len = static_cast<int>(dmax(0, dmin(kChunk, k - c0)));
      float p[kLinRows];
#pragma unroll
      for (int r = 0; r < kLinRows; ++r) {
        float acc = 0.0f;
        if (r < rows) {
          const float* xr = x + (r0 + r) * ldx + c0;
          for (int i = 0; i < len; ++i) acc = dm::fma_rn(xr[i], wl[lane][i], acc);
        }
        p[r] = acc;
      }
      const int chunks = static_cast<int>(dmin(32, (k - g0 + kChunk - 1) / kChunk));
      for (int c = 0; c < chunks; ++c) {
#pragma unroll
        for (int r = 0; r < kLinRows; ++r) {
          if (r < rows) s[r] = s[r] + __shfl_sync(0xffffffffu, p[r], c);  // rows: warp-uniform
        }
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kLinRows; ++r) {
        if (r < rows) {
          float v = s[r];
          if (bias != nullptr) v = v + bias[j];
          y[(r0 + r) * ldy + j] = v;
        }
      }
    }
  }
}

// --- rms_norm --------------------------------------------------------------------------
// One block per row: thread t computes the partials of chunks t, t+256, ...; thread 0
// folds them in order and forms r; then every thread scales its elements.
__global__ void rms_norm_kernel(const float* x, std::int64_t ldx, const float* w, float eps,
                                float* y, std::int64_t ldy, std::int64_t n) {
  DETINFER_DYNAMIC_SHARED(float, partial);
  __shared__ float s_r;
  const float* xr = x + blockIdx.x * ldx;
  float* yr = y + blockIdx.x * ldy;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const std::int64_t i1 = dmin(n, (c + 1) * kChunk);
    float p = 0.0f;
    for (std::int64_t i = c * kChunk; i < i1; ++i) p = dm::fma_rn(xr[i], xr[i], p);
    partial[c] = p;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float ss = 0.0f;
    for (std::int64_t c = 0; c < chunks; ++c) ss = ss + partial[c];
    s_r = dm::div_rn(1.0f, dm::sqrt_rn(dm::div_rn(ss, static_cast<float>(n)) + eps));
  }
  __syncthreads();
  const float r = s_r;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] * r) * w[i];
}

// --- softmax / log_softmax -------------------------------------------------------------
template <bool kLog>
__global__ void softmax_kernel(const float* x, std::int64_t ldx, float* y, std::int64_t ldy,
                               std::int64_t n) {
  DETINFER_DYNAMIC_SHARED(float, partial);
  __shared__ float s_total;
  const float* xr = x + blockIdx.x * ldx;
  float* yr = y + blockIdx.x * ldy;
  const float m = block_max_of(n, [xr](std::int64_t i) { return xr[i]; });
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const std::int64_t i1 = dmin(n, (c + 1) * kChunk);
    float p = 0.0f;
    for (std::int64_t i = c * kChunk; i < i1; ++i) {
      const float e = dm::exp_f32(xr[i] - m);
      if (!kLog) yr[i] = e;
      p = p + e;
    }
    partial[c] = p;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (std::int64_t c = 0; c < chunks; ++c) s = s + partial[c];
    s_total = kLog ? dm::log_f32(s) : s;
  }
  __syncthreads();
  const float t = s_total;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (kLog) {
      yr[i] = (xr[i] - m) - t;
    } else {
      yr[i] = dm::div_rn(yr[i], t);
    }
  }
}

// --- argmax ----------------------------------------------------------------------------
__global__ void argmax_kernel(const float* x, std::int64_t ldx, std::int64_t n, std::int64_t* out) {
  const float* xr = x + blockIdx.x * ldx;
  MaxPair p{0.0f, -1};
  int nan = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i];
    if (v != v) nan = 1;
    p = max_pair_add(p, v, i);
  }
  nan = __syncthreads_or(nan);
  p = block_max_pair(p);
  if (threadIdx.x == 0) out[blockIdx.x] = nan ? -1 : p.i;
}

// --- rope ------------------------------------------------------------------------------
__global__ void rope_kernel(float* x, std::int64_t ldx, std::int64_t heads, std::int64_t ldh,
                            std::int64_t d, const float* cos, const float* sin,
                            std::int64_t ld_table, const std::int32_t* positions) {
  const std::int64_t half = d / 2;
  const std::int64_t pos = positions[blockIdx.x];
  const float* c = cos + pos * ld_table;
  const float* s = sin + pos * ld_table;
  for (std::int64_t t = threadIdx.x; t < heads * half; t += blockDim.x) {
    const std::int64_t h = t / half;
    const std::int64_t i = t % half;
    float* v = x + blockIdx.x * ldx + h * ldh;
    const float a = v[i];
    const float b = v[i + half];
    v[i] = a * c[i] - b * s[i];
    v[i + half] = b * c[i] + a * s[i];
  }
}

// --- embedding -------------------------------------------------------------------------
template <core::DType D>
__global__ void embedding_kernel(const std::int32_t* ids, const void* table, std::int64_t vocab,
                                 std::int64_t dim, float* out, std::int64_t ldo,
                                 std::int32_t* error_flag) {
  const std::int64_t id = ids[blockIdx.x];
  float* o = out + blockIdx.x * ldo;
  if (id < 0 || id >= vocab) {
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = dm::quiet_nan();
    if (threadIdx.x == 0 && error_flag != nullptr) atomicExch(error_flag, 1);
    return;
  }
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = widen<D>(table, id * dim + i);
}

// --- Philox -------------------------------------------------------------------------
__global__ void philox_kernel(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_step,
                              std::uint32_t lane, std::uint32_t* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = dm::philox_block(seed, stream_id, first_step + static_cast<std::uint64_t>(i)).v[lane];
}

// --- sampling draw ---------------------------------------------------------------------
// Key = (descending p, ascending id): probabilities are >= 0, so their bits order like
// their values; -0 is mapped to +0 (they compare equal on the CPU).
__global__ void draw_keys_kernel(const float* p, const std::int32_t* ids, std::int64_t n,
                                 std::int64_t padded, std::uint64_t* keys, std::int32_t* pos) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < padded;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    if (i < n) {
      const float v = p[i] == 0.0f ? 0.0f : p[i];
      const std::uint64_t desc = 0xffffffffu - dm::bits_of(v);
      keys[i] = (desc << 32) | static_cast<std::uint32_t>(ids[i]);
      pos[i] = static_cast<std::int32_t>(i);
    } else {
      keys[i] = ~std::uint64_t{0};  // padding sorts last
      pos[i] = -1;
    }
  }
}

__global__ void bitonic_step_kernel(std::uint64_t* keys, std::int32_t* pos, std::int64_t padded,
                                    std::int64_t j, std::int64_t k) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < padded;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t other = i ^ j;
    if (other <= i) continue;
    const bool ascending = (i & k) == 0;
    const std::uint64_t a = keys[i];
    const std::uint64_t b = keys[other];
    if ((a > b) == ascending) {
      keys[i] = b;
      keys[other] = a;
      const std::int32_t t = pos[i];
      pos[i] = pos[other];
      pos[other] = t;
    }
  }
}

// decode::draw_index's two sequential loops, in one thread.
__global__ void draw_pick_kernel(const float* p, const std::int32_t* pos, std::int64_t n,
                                 std::uint64_t seed, std::uint64_t stream_id, std::uint64_t step,
                                 std::int64_t* out) {
  float total = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) total = total + p[pos[j]];
  const float target = dm::uniform01(dm::philox_block(seed, stream_id, step).v[0]) * total;
  float cum = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    cum = cum + p[pos[j]];
    if (cum > target) {
      *out = pos[j];
      return;
    }
  }
  *out = pos[n - 1];
}

}  // namespace
}  // namespace detinfer::kernels::cuda
