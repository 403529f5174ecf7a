// Device-invariant CUDA kernels: faster than the canonical ones, not bitwise equal to the
// CPU, but each output row's reduction shape is fixed (never chosen by M, by the data or
// by occupancy), so results are invariant to batch size on a given GPU model.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/fast_kernels.cuh"

namespace detinfer::kernels::cuda {

namespace {

constexpr int kThreads = 256;

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

void f32_to_bf16(const float* x, std::uint16_t* y, std::int64_t n, Stream stream) {
  if (n <= 0) return;
  require_ptr(x, "f32_to_bf16", "x");
  require_ptr(y, "f32_to_bf16", "y");
  const auto blocks = static_cast<unsigned>(dmin((n + kThreads - 1) / kThreads, 65535));
  f32_to_bf16_kernel<<<blocks, kThreads, 0, stream>>>(x, y, n);
  DETINFER_CUDA_CHECK_LAUNCH("f32_to_bf16_kernel");
}

void linear_bf16_tc(const std::uint16_t* x, std::int64_t ldx, std::int64_t m,
                    const std::uint16_t* w, std::int64_t n, std::int64_t k, const float* bias,
                    float* y, std::int64_t ldy, Stream stream) {
  const char* op = "linear_bf16_tc";
  check_linear_args(op, x, ldx, m, w, n, k, y, ldy);
  if (k % 8 != 0 || ldx % 8 != 0 || !aligned16(x) || !aligned16(w))
    fail(ErrorCode::kUnsupported, "cuda::", op,
         ": needs k % 8 == 0, ldx % 8 == 0 and 16-byte aligned x and w (k=", k, ", ldx=", ldx, ")");
  const dim3 grid(grid_x((n + kGemmTileN - 1) / kGemmTileN, op),
                  grid_yz((m + kGemmTileM - 1) / kGemmTileM, op));
  gemm_bf16_kernel<<<grid, kGemmThreads, 0, stream>>>(x, ldx, m, w, n, k, bias, y, ldy);
  DETINFER_CUDA_CHECK_LAUNCH("gemm_bf16_kernel");
}

void rms_norm_fast(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                   std::int64_t ldy, std::int64_t rows, std::int64_t n, Stream stream) {
  const char* op = "rms_norm_fast";
  check_row_args(op, x, ldx, y, ldy, rows, n);
  require_ptr(w, op, "w");
  rms_norm_fast_kernel<<<grid_x(rows, op), kFastNormThreads, 0, stream>>>(x, ldx, w, eps, y, ldy,
                                                                          n);
  DETINFER_CUDA_CHECK_LAUNCH("rms_norm_fast_kernel");
}

}  // namespace detinfer::kernels::cuda
