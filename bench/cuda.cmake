# CUDA kernel benchmarks (issue 11): need a GPU to run; built whenever nvcc was found so
# that CI checks they compile. bench_cuda times canonical and device-invariant kernels
# against a device-to-device copy; bench_cuda_cublas puts the tensor-core linear next to
# cuBLAS (what torch.matmul calls) in the same process.
if(DETINFER_HAVE_CUDA)
  add_executable(bench_cuda ${CMAKE_CURRENT_LIST_DIR}/bench_cuda.cpp)
  target_link_libraries(bench_cuda PRIVATE detinfer_flags benchmark::benchmark Threads::Threads)
  detinfer_link_modules(bench_cuda kernels_cuda)
  if(TARGET CUDA::cublas)
    add_executable(bench_cuda_cublas ${CMAKE_CURRENT_LIST_DIR}/bench_cuda_cublas.cpp)
    target_link_libraries(bench_cuda_cublas PRIVATE detinfer_flags benchmark::benchmark
      Threads::Threads CUDA::cublas)
    detinfer_link_modules(bench_cuda_cublas kernels_cuda)
  endif()
endif()
