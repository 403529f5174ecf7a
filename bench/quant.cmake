# bench_quant: the q8_0 quantized linear vs the bf16 PackedLinear, same-run ratios.
add_executable(bench_quant ${CMAKE_CURRENT_LIST_DIR}/bench_quant.cpp)
target_link_libraries(bench_quant PRIVATE detinfer_flags benchmark::benchmark Threads::Threads)
detinfer_link_modules(bench_quant kernels)
