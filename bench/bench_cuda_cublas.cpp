// The device-invariant tensor-core linear next to cuBLAS (cublasGemmEx, bf16 inputs, f32
// output and compute: the call torch.matmul makes) on the decode and prefill
// shapes, in the same process: read BM_Cublas vs BM_TensorCoreVsCublas per (shape, M).
// Run: build/<dir>/bench/bench_cuda_cublas --benchmark_min_time=0.05   (needs a GPU)
#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#include "cuda_bench_util.h"

namespace detinfer::kernels::cuda::bench {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " + std::to_string(s));
}

// y[M][N] = x[M][K] W[N][K]^T: in cuBLAS's column-major terms y^T = W^T(op T) x^T.
void BM_Cublas(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const LayerShape s = kShapes[state.range(0)];
  const std::int64_t m = state.range(1);
  const DeviceBuffer w = random_bf16(s.n * s.k, 1);
  const DeviceBuffer x = random_bf16(m * s.k, 2);
  DeviceBuffer y(m * s.n * sizeof(float));
  cublasHandle_t handle = nullptr;
  check(cublasCreate(&handle), "cublasCreate");
  const float alpha = 1.0f;
  const float beta = 0.0f;
  gpu_loop(state, [&] {
    check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(m),
                       static_cast<int>(s.k), &alpha, w.data(), CUDA_R_16BF, static_cast<int>(s.k),
                       x.data(), CUDA_R_16BF, static_cast<int>(s.k), &beta, y.data(), CUDA_R_32F,
                       static_cast<int>(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  });
  cublasDestroy(handle);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.n * s.k * 2));
}
BENCHMARK(BM_Cublas)->Apply([](auto* b) { shape_args(b, {1, 8, 64, 4096}); });

void BM_TensorCoreVsCublas(benchmark::State& state) { run_tensor_core_linear(state); }
BENCHMARK(BM_TensorCoreVsCublas)->Apply([](auto* b) { shape_args(b, {1, 8, 64, 4096}); });

}  // namespace
}  // namespace detinfer::kernels::cuda::bench

BENCHMARK_MAIN();
