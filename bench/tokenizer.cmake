# bench_tokenizer: encode throughput on >= 1 MB of English prose and CJK text with a
# ~150k-entry byte-level vocabulary, one thread (docs/performance.md, "Tokenizer").
add_executable(bench_tokenizer ${CMAKE_CURRENT_LIST_DIR}/bench_tokenizer.cpp)
target_link_libraries(bench_tokenizer PRIVATE detinfer_flags benchmark::benchmark Threads::Threads)
detinfer_link_modules(bench_tokenizer tokenizer devtools)
