# Times the Redis tier next to the others: only with DETINFER_WITH_REDIS.
if(NOT DETINFER_HAVE_REDIS)
  return()
endif()
# bench_session_cache: time to first token through DeterministicSession (the public API,
# as an application sees it) for a 2048-token prompt with 1920 tokens in the KV-prefix
# cache (memory, disk, Redis) vs uncached; Qwen2.5-0.5B layer shape, bf16 weights.
add_executable(bench_session_cache ${CMAKE_CURRENT_LIST_DIR}/bench_session_cache.cpp)
target_link_libraries(bench_session_cache PRIVATE detinfer_flags benchmark::benchmark
  Threads::Threads)
target_include_directories(bench_session_cache PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_session_cache session devtools)
