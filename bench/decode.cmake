# bench_decode: the end-to-end decode figures of issue 18 (docs/performance.md, "Decode
# at the limit"): batch-1 decode vs the read-bandwidth bound at 1 and 2 threads for the
# Qwen2.5-0.5B and SmolLM-135M shapes (bf16, f32), per-step work, decode at long context
# (attention share) and prefill of 512 tokens. Models are generated into /tmp on first
# use. A plain program: run it through scripts/perf-figures.sh.
add_executable(bench_decode ${CMAKE_CURRENT_LIST_DIR}/bench_decode.cpp)
target_link_libraries(bench_decode PRIVATE detinfer_flags Threads::Threads)
detinfer_link_modules(bench_decode model decode fingerprint devtools)

# bench_sampling: per-token cost of decode::choose_token at Qwen2's vocabulary (151,936)
# for greedy, top_k, top_p and min_p (docs/performance.md, "Sampling").
add_executable(bench_sampling ${CMAKE_CURRENT_LIST_DIR}/bench_sampling.cpp)
target_link_libraries(bench_sampling PRIVATE detinfer_flags benchmark::benchmark
  Threads::Threads)
detinfer_link_modules(bench_sampling decode)
