// Paged-KV attention kernels (canonical and split): see attention.cu.
//
// Device code only (no CUDA runtime calls), in an anonymous namespace: included by the
// launcher .cu file and, compiled as plain C++ under DETINFER_CUDA_EMULATION, by the CPU
// emulation test (tests/cuda/cuda_emulation_test.cpp), which runs these very kernels
// thread by thread on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/reference/tanh_hd.h"

namespace detinfer::kernels::cuda {
namespace {

struct AttentionArgs {
  const float* q;
  std::int64_t ldq;
  const std::int64_t* num_keys;
  std::int64_t num_heads;
  PagedKvView kv;
  float scale;
  float* out;
  std::int64_t ldo;
  // kernels::AttentionMask: > 0: a row sees its last `window` keys (the canonical kernel
  // folds them from the first visible one, the split kernel clips its fixed splits to
  // them); softcap > 0: scores soft-capped.
  std::int64_t window = 0;
  float softcap = 0.0f;
};

// The first key a row with `keys` keys sees: max(0, keys - window) when windowed, else 0.
__device__ __forceinline__ std::int64_t first_visible(const AttentionArgs& a, std::int64_t keys) {
  return a.window > 0 ? dmax(0, keys - a.window) : 0;
}

// ref::kv_offset: element offset of token t's K (or V) vector of kv head h.
__device__ __forceinline__ std::int64_t kv_offset(const PagedKvView& kv, std::int64_t t,
                                                  std::int64_t h) {
  const std::int64_t block = kv.block_table[t / kv.block_size];
  const std::int64_t slot = t % kv.block_size;
  return (block * kv.block_size + slot) * (kv.num_kv_heads * kv.head_dim) + h * kv.head_dim;
}

// ref::kv_value: element i of a pool of kv.kv_dtype, widened exactly.
__device__ __forceinline__ float kv_value(const void* pool, const PagedKvView& kv, std::int64_t i) {
  if (kv.kv_dtype == core::DType::kBF16)
    return dm::bf16_to_f32(static_cast<const std::uint16_t*>(pool)[i]);
  if (kv.kv_dtype == core::DType::kF16)
    return dm::f16_to_f32(static_cast<const std::uint16_t*>(pool)[i]);
  return static_cast<const float*>(pool)[i];
}

// dot(q, k[t], d) * scale with the spec's chunked order (q staged in shared memory), then
// tanh_f32(s / cap) * cap when cap > 0 (numerics spec, "Sliding window and soft-capping").
__device__ __forceinline__ float score(const float* qs, const PagedKvView& kv, std::int64_t t,
                                       std::int64_t h, float scale, float cap = 0.0f) {
  const std::int64_t k = kv_offset(kv, t, h);
  const std::int64_t d = kv.head_dim;
  float s = 0.0f;
  for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
    const std::int64_t c1 = dmin(d, c0 + kChunk);
    float p = 0.0f;
    for (std::int64_t i = c0; i < c1; ++i) p = dm::fma_rn(qs[i], kv_value(kv.k_pool, kv, k + i), p);
    s = s + p;
  }
  s = s * scale;
  return cap > 0.0f ? explog::softcap_f32(s, cap) : s;
}

// Softmax-weighted sums over keys [a, b) in 64-key chunks from a (the first visible key in
// the canonical kernel; in the split kernel the split's start, or the first visible key
// when the window starts inside the split) given the max m: thread 0
// returns the denominator in *den, thread c < d its numerator in *num.
__device__ void attend_range(const float* qs, const PagedKvView& kv, std::int64_t h, float scale,
                             std::int64_t a, std::int64_t b, float m, float* den, float* num,
                             float cap = 0.0f) {
  __shared__ float e[kChunk];
  const std::int64_t d = kv.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  float dsum = 0.0f;
  float nsum = 0.0f;
  for (std::int64_t j0 = a; j0 < b; j0 += kChunk) {
    const int len = static_cast<int>(dmin(kChunk, b - j0));
    if (tid < len) e[tid] = dm::exp_f32(score(qs, kv, j0 + tid, h, scale, cap) - m);
    __syncthreads();
    if (tid == 0) {
      float p = 0.0f;
      for (int j = 0; j < len; ++j) p = p + e[j];
      dsum = dsum + p;
    }
    if (tid < d) {
      float p = 0.0f;
      for (int j = 0; j < len; ++j)
        p = dm::fma_rn(e[j], kv_value(kv.v_pool, kv, kv_offset(kv, j0 + j, h) + tid), p);
      nsum = nsum + p;
    }
    __syncthreads();
  }
  *den = dsum;
  *num = nsum;
}

struct RowHead {
  std::int64_t r;
  std::int64_t h;     // query head
  std::int64_t kvh;   // kv head
  std::int64_t keys;  // num_keys[r]
  bool valid;         // keys fit the block table
};

__device__ __forceinline__ RowHead row_head(const AttentionArgs& a, std::int64_t flat) {
  RowHead rh;
  rh.r = flat / a.num_heads;
  rh.h = flat % a.num_heads;
  rh.kvh = rh.h / (a.num_heads / a.kv.num_kv_heads);
  rh.keys = a.num_keys[rh.r];
  rh.valid = rh.keys <= a.kv.num_blocks * a.kv.block_size;
  return rh;
}

__device__ __forceinline__ void load_q(const AttentionArgs& a, const RowHead& rh, float* qs) {
  const float* q = a.q + rh.r * a.ldq + rh.h * a.kv.head_dim;
  for (std::int64_t i = threadIdx.x; i < a.kv.head_dim; i += blockDim.x) qs[i] = q[i];
  __syncthreads();
}

__global__ void attention_kernel(AttentionArgs a) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float s_den;
  const RowHead rh = row_head(a, blockIdx.x);
  const std::int64_t d = a.kv.head_dim;
  float* out = a.out + rh.r * a.ldo + rh.h * d;
  if (rh.keys <= 0 || !rh.valid) {  // the reference returns zeros for no keys
    const float v = rh.keys <= 0 ? 0.0f : dm::quiet_nan();
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out[c] = v;
    return;
  }
  load_q(a, rh, qs);
  // The visible keys [first, keys), renumbered from 0 for the max (its NaN rule) and the
  // chunks.
  const std::int64_t first = first_visible(a, rh.keys);
  const float m = block_max_of(rh.keys - first, [&](std::int64_t j) {
    return score(qs, a.kv, first + j, rh.kvh, a.scale, a.softcap);
  });
  float den = 0.0f;
  float num = 0.0f;
  attend_range(qs, a.kv, rh.kvh, a.scale, first, rh.keys, m, &den, &num, a.softcap);
  if (threadIdx.x == 0) s_den = den;
  __syncthreads();
  if (threadIdx.x < d) out[threadIdx.x] = dm::div_rn(num, s_den);
}

// Split record: d numerators, then the split's max and denominator. Split sp covers the
// visible keys of [sp * kAttentionSplitKeys, (sp + 1) * kAttentionSplitKeys): boundaries
// fixed in absolute key positions, so a row's splits depend only on its own key count and
// the window. A split wholly before the window (or past the row's keys) does nothing and
// reads no block (released blocks, -1 in the table, lie wholly before the window).
__global__ void attention_split_kernel(AttentionArgs a, float* ws, std::int64_t splits) {
  __shared__ float qs[kMaxHeadDim];
  const RowHead rh = row_head(a, blockIdx.x);
  const std::int64_t d = a.kv.head_dim;
  const std::int64_t sp = blockIdx.y;
  float* rec = ws + (static_cast<std::int64_t>(blockIdx.x) * splits + sp) * (d + 2);
  const std::int64_t j0 = dmax(first_visible(a, rh.keys), sp * kAttentionSplitKeys);
  const std::int64_t j1 = dmin(rh.keys, (sp + 1) * kAttentionSplitKeys);
  if (j0 >= j1 || !rh.valid) return;  // the combine kernel only reads splits with keys
  load_q(a, rh, qs);
  const float m = block_max_of(
      j1 - j0, [&](std::int64_t i) { return score(qs, a.kv, j0 + i, rh.kvh, a.scale, a.softcap); });
  float den = 0.0f;
  float num = 0.0f;
  attend_range(qs, a.kv, rh.kvh, a.scale, j0, j1, m, &den, &num, a.softcap);
  if (threadIdx.x < d) rec[threadIdx.x] = num;
  if (threadIdx.x == 0) {
    rec[d] = m;
    rec[d + 1] = den;
  }
}

// Combines a row-head's splits with keys (from the one holding the first visible key) in
// split order: out = sum_s num_s e_s / sum_s den_s e_s with e_s = exp(m_s - max_s m_s).
__global__ void attention_combine_kernel(AttentionArgs a, const float* ws, std::int64_t splits) {
  const RowHead rh = row_head(a, blockIdx.x);
  const std::int64_t d = a.kv.head_dim;
  float* out = a.out + rh.r * a.ldo + rh.h * d;
  const std::int64_t used = (rh.keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys;
  if (rh.keys <= 0 || !rh.valid || used > splits) {
    const float v = rh.keys <= 0 ? 0.0f : dm::quiet_nan();
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out[c] = v;
    return;
  }
  const std::int64_t s0 = first_visible(a, rh.keys) / kAttentionSplitKeys;
  const float* recs = ws + static_cast<std::int64_t>(blockIdx.x) * splits * (d + 2);
  float m = recs[s0 * (d + 2) + d];
  for (std::int64_t s = s0 + 1; s < used; ++s) m = fmaxf(m, recs[s * (d + 2) + d]);
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float den = 0.0f;
    float num = 0.0f;
    for (std::int64_t s = s0; s < used; ++s) {
      const float* rec = recs + s * (d + 2);
      const float f = dm::exp_f32(rec[d] - m);
      den = dm::fma_rn(rec[d + 1], f, den);
      num = dm::fma_rn(rec[c], f, num);
    }
    out[c] = dm::div_rn(num, den);
  }
}

}  // namespace
}  // namespace detinfer::kernels::cuda
