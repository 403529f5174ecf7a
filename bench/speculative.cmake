# bench_speculative: decode with speculative decoding against plain decoding at controlled
# acceptance rates (a replay drafter with fixed corruption), batch 1, same session and
# threads, outputs checked bitwise (docs/speculative.md, docs/performance.md).
add_executable(bench_speculative ${CMAKE_CURRENT_LIST_DIR}/bench_speculative.cpp)
target_link_libraries(bench_speculative PRIVATE detinfer_flags Threads::Threads)
target_include_directories(bench_speculative PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_speculative session devtools)
