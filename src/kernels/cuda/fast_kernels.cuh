// Device-invariant elementwise and RMSNorm kernels: see fast.cu for the launchers (the
// tensor-core GEMM stays there: WMMA has no CPU emulation).
//
// Device code only, in an anonymous namespace: included by fast.cu and, compiled as plain
// C++ under DETINFER_CUDA_EMULATION, by the CPU emulation test.
#pragma once

#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"

namespace detinfer::kernels::cuda {
namespace {

constexpr int kFastNormThreads = 256;

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
