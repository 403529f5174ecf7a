# bench_fingerprint: cost of the per-step logits digest (XXH3-64 over a 151936-float row,
# Qwen2's vocabulary) next to the bf16 lm_head decode linear (896 x 151936) measured in
# the same run, and fingerprint JSON / metrics costs (docs/performance.md, "Fingerprints").
add_executable(bench_fingerprint ${CMAKE_CURRENT_LIST_DIR}/bench_fingerprint.cpp)
target_link_libraries(bench_fingerprint PRIVATE detinfer_flags benchmark::benchmark
  Threads::Threads)
target_include_directories(bench_fingerprint PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_fingerprint fingerprint kernels)
