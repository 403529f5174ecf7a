# Compares against libtorch (torch::mm / the fast mode): only with DETINFER_WITH_TORCH.
if(NOT DETINFER_HAVE_TORCH)
  return()
endif()
# bench_kernels: canonical CPU kernels vs a plain read bandwidth and vs torch::mm
# (OpenBLAS), each ratio measured in the same run (docs/performance.md, "Kernels").
add_executable(bench_kernels
  ${CMAKE_CURRENT_LIST_DIR}/bench_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bench_kernels_torch.cpp)
target_link_libraries(bench_kernels PRIVATE detinfer_flags benchmark::benchmark
  detinfer_torch_deps Threads::Threads)
target_include_directories(bench_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR})
detinfer_link_modules(bench_kernels kernels)

# bench_attention_prefill: one prefill chunk's attention at long contexts (multiply-adds
# per second; docs/performance.md, "Prefill attention").
add_executable(bench_attention_prefill ${CMAKE_CURRENT_LIST_DIR}/bench_attention_prefill.cpp)
target_link_libraries(bench_attention_prefill PRIVATE detinfer_flags benchmark::benchmark
  Threads::Threads)
detinfer_link_modules(bench_attention_prefill kernels)
