# bench_token_mask: the per-token cost of constrained decoding's token mask on a
# synthetic 151,646-token vocabulary (docs/performance.md, "Constrained decoding").
add_executable(bench_token_mask ${CMAKE_CURRENT_LIST_DIR}/bench_token_mask.cpp)
target_link_libraries(bench_token_mask PRIVATE detinfer_flags Threads::Threads)
detinfer_link_modules(bench_token_mask decode)
