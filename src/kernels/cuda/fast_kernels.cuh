// Device-invariant kernels (tensor-core GEMM, RMSNorm, f32 -> bf16): see fast.cu for the
// launchers.
//
// Device code only, in an anonymous namespace: included by fast.cu and, compiled as plain
// C++ under DETINFER_CUDA_EMULATION, by the CPU emulation test.
#pragma once

#include <cstdint>

#if !defined(DETINFER_CUDA_EMULATION)
#include <cuda_bf16.h>
#include <mma.h>
#endif

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace detinfer::kernels::cuda {
namespace {

constexpr int kFastNormThreads = 256;

// --- bf16 tensor-core GEMM -----------------------------------------------------------------
// One tile shape for every M (kGemmTileM x kGemmTileN x kGemmTileK, 4 warps of 32x32),
// K walked from 0 upward in steps of 16 by every tile, no split-K: the sequence of mma
// operations that produces y[m][j] is the same whatever M is and wherever row m falls.
constexpr int kPadA = 8;  // bf16 elements of row padding (keeps 32-byte fragment alignment)
constexpr int kPadC = 4;  // float padding of the output staging tile
constexpr int kGemmThreads = 128;

__device__ __forceinline__ void load_tile(const std::uint16_t* src, std::int64_t ld,
                                          std::int64_t rows, std::int64_t row0, std::int64_t k,
                                          std::int64_t k0,
                                          __nv_bfloat16 (*dst)[kGemmTileK + kPadA]) {
  constexpr int kVecPerRow = kGemmTileK / 8;  // 8 bf16 per 16-byte vector
  for (int v = static_cast<int>(threadIdx.x); v < kGemmTileM * kVecPerRow; v += kGemmThreads) {
    const int row = v / kVecPerRow;
    const int col = (v % kVecPerRow) * 8;
    const std::int64_t gr = row0 + row;
    const std::int64_t gk = k0 + col;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (gr < rows && gk < k) val = *reinterpret_cast<const uint4*>(src + gr * ld + gk);
    *reinterpret_cast<uint4*>(&dst[row][col]) = val;
  }
}

__global__ void __launch_bounds__(kGemmThreads)
    gemm_bf16_kernel(const std::uint16_t* __restrict__ x, std::int64_t ldx, std::int64_t m,
                     const std::uint16_t* __restrict__ w, std::int64_t n, std::int64_t k,
                     const float* __restrict__ bias, float* __restrict__ y, std::int64_t ldy) {
  using namespace nvcuda;
  static_assert(kGemmTileM == kGemmTileN, "load_tile assumes square M/N tiles");
  __shared__ __align__(32) __nv_bfloat16 as[kGemmTileM][kGemmTileK + kPadA];
  __shared__ __align__(32) __nv_bfloat16 bs[kGemmTileN][kGemmTileK + kPadA];
  __shared__ __align__(32) float cs[kGemmTileM][kGemmTileN + kPadC];
  const std::int64_t m0 = std::int64_t{blockIdx.y} * kGemmTileM;
  const std::int64_t n0 = std::int64_t{blockIdx.x} * kGemmTileN;
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int wm = (warp >> 1) * 32;
  const int wn = (warp & 1) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& row : acc)
    for (auto& f : row) wmma::fill_fragment(f, 0.0f);
  for (std::int64_t k0 = 0; k0 < k; k0 += kGemmTileK) {
    load_tile(x, ldx, m, m0, k, k0, as);
    load_tile(w, k, n, n0, k, k0, bs);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kGemmTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(a[i], &as[wm + i * 16][kk], kGemmTileK + kPadA);
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(b[j], &bs[wn + j * 16][kk], kGemmTileK + kPadA);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wm + i * 16][wn + j * 16], acc[i][j], kGemmTileN + kPadC,
                              wmma::mem_row_major);
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < kGemmTileM * kGemmTileN; e += kGemmThreads) {
    const int r = e / kGemmTileN;
    const int c = e % kGemmTileN;
    const std::int64_t gr = m0 + r;
    const std::int64_t gc = n0 + c;
    if (gr < m && gc < n) {
      float v = cs[r][c];
      if (bias != nullptr) v = v + bias[gc];
      y[gr * ldy + gc] = v;
    }
  }
}

__global__ void f32_to_bf16_kernel(const float* x, std::uint16_t* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    y[i] = dm::f32_to_bf16(x[i]);
}

// --- RMSNorm, one row per block ------------------------------------------------------------
// Thread t accumulates x[t], x[t+256], ... with fma; a fixed shared-memory tree adds the
// 256 partials. Nothing depends on the number of rows.
__global__ void __launch_bounds__(kFastNormThreads)
    rms_norm_fast_kernel(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                         std::int64_t ldy, std::int64_t n) {
  __shared__ float part[kFastNormThreads];
  const float* xr = x + blockIdx.x * ldx;
  float* yr = y + blockIdx.x * ldy;
  float acc = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += kFastNormThreads)
    acc = dm::fma_rn(xr[i], xr[i], acc);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kFastNormThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s)
      part[threadIdx.x] = part[threadIdx.x] + part[threadIdx.x + s];
    __syncthreads();
  }
  const float r = dm::div_rn(1.0f, dm::sqrt_rn(dm::div_rn(part[0], static_cast<float>(n)) + eps));
  for (std::int64_t i = threadIdx.x; i < n; i += kFastNormThreads) yr[i] = (xr[i] * r) * w[i];
}

}  // namespace
}  // namespace detinfer::kernels::cuda
