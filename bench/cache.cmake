# Times the Redis tier next to the others: only with DETINFER_WITH_REDIS.
if(NOT DETINFER_HAVE_REDIS)
  return()
endif()
# bench_cache: cost of the KV-prefix cache key chain per token, and get/put latency of the
# memory, disk and Redis tiers for a Qwen2.5-0.5B-sized block, next to a plain memcpy of
# the same block measured in the same run (docs/performance.md, "Caches").
add_executable(bench_cache ${CMAKE_CURRENT_LIST_DIR}/bench_cache.cpp)
target_link_libraries(bench_cache PRIVATE detinfer_flags benchmark::benchmark Threads::Threads)
target_include_directories(bench_cache PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_cache cache)

# bench_cache_ttft: time to first token of a 2048-token prompt with 1920 tokens cached
# (memory, disk, Redis) vs uncached, on the engine with a Qwen2.5-0.5B-shaped model.
add_executable(bench_cache_ttft ${CMAKE_CURRENT_LIST_DIR}/bench_cache_ttft.cpp)
target_link_libraries(bench_cache_ttft PRIVATE detinfer_flags benchmark::benchmark
  Threads::Threads)
target_include_directories(bench_cache_ttft PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_cache_ttft cache engine devtools)
