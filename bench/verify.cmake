# bench_verify: verifying a transcript (teacher-forced prefill, DeterministicSession::verify)
# against generating it, batch 1, same session and threads (docs/fingerprint.md).
add_executable(bench_verify ${CMAKE_CURRENT_LIST_DIR}/bench_verify.cpp)
target_link_libraries(bench_verify PRIVATE detinfer_flags Threads::Threads)
target_include_directories(bench_verify PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_verify session devtools)
