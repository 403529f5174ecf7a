// Device helpers shared by the CUDA kernel TUs: exact block-wide max with the
// reference's tie rule, and ordered folds of spec chunk partials.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.h"

// Dynamically sized shared memory (the launch's third <<<>>> argument); the CPU
// emulation test hands out a per-block buffer instead.
#if defined(DETINFER_CUDA_EMULATION)
#define DETINFER_DYNAMIC_SHARED(T, name) T* const name = ::emu::dynamic_shared<T>()
#else
#define DETINFER_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

namespace detinfer::kernels::cuda {

inline constexpr int kChunk = 64;  // numerics spec v1 reduction chunk (ref::kChunk)

// std::min/max are host-only constexpr functions for nvcc.
__host__ __device__ __forceinline__ std::int64_t dmin(std::int64_t a, std::int64_t b) {
  return a < b ? a : b;
}
__host__ __device__ __forceinline__ std::int64_t dmax(std::int64_t a, std::int64_t b) {
  return a > b ? a : b;
}

// The best (value, index) seen so far; index -1 = none. Order: larger value first, then
// lower index. NaNs never enter. This is a total order, so any reduction tree gives the
// same result as the reference's left-to-right scan `m = x[i] > m ? x[i] : m` (which
// keeps the first of equal values, e.g. the first of +0 and -0).
struct MaxPair {
  float v;
  std::int64_t i;
};

__device__ __forceinline__ MaxPair max_pair_combine(MaxPair a, MaxPair b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__device__ __forceinline__ MaxPair max_pair_add(MaxPair a, float v, std::int64_t i) {
  if (v != v) return a;
  return max_pair_combine(a, MaxPair{v, i});
}

// Block-wide combine (blockDim.x ≤ 1024, a multiple of 32). Every thread gets the result.
__device__ __forceinline__ MaxPair block_max_pair(MaxPair p) {
  __shared__ float sv[32];
  __shared__ std::int64_t si[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) {
    MaxPair o;
    o.v = __shfl_down_sync(0xffffffffu, p.v, off);
    o.i = __shfl_down_sync(0xffffffffu, p.i, off);
    p = max_pair_combine(p, o);
  }
  if (lane == 0) {
    sv[warp] = p.v;
    si[warp] = p.i;
  }
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
  p = MaxPair{0.0f, -1};
  for (int w = 0; w < warps; ++w) p = max_pair_combine(p, MaxPair{sv[w], si[w]});
  __syncthreads();  // sv/si may be reused by the next call
  return p;
}

// The reference's max_of over n values produced by value(i): the first element when it
// is a NaN, else the largest non-NaN value (first of equals). n ≥ 1.
// value(0) is read before the reduction's barriers, so a caller may overwrite the input
// (in-place softmax) as soon as this returns.
template <typename F>
__device__ __forceinline__ float block_max_of(std::int64_t n, F value) {
  const float first = value(0);
  MaxPair p{0.0f, -1};
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) p = max_pair_add(p, value(i), i);
  p = block_max_pair(p);
  if (first != first || p.i < 0) return first;
  return p.v;
}

}  // namespace detinfer::kernels::cuda
