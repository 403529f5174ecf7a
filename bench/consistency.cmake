# bench_consistency: distinct outputs of one greedy request repeated amid random traffic,
# canonical vs fast mode (the tiny model written by the session tests' helper).
add_executable(bench_consistency ${CMAKE_CURRENT_LIST_DIR}/bench_consistency.cpp)
target_link_libraries(bench_consistency PRIVATE detinfer_flags benchmark::benchmark
  Threads::Threads)
target_include_directories(bench_consistency PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_consistency session)
