# bench_chat: turn-3 time to first token of a conversation with multi-turn KV reuse vs
# prompt-only caching vs no cache (DeterministicSession, Qwen2.5-0.5B layer shape, bf16).
add_executable(bench_chat ${CMAKE_CURRENT_LIST_DIR}/bench_chat.cpp)
target_link_libraries(bench_chat PRIVATE detinfer_flags benchmark::benchmark Threads::Threads)
target_include_directories(bench_chat PRIVATE ${PROJECT_SOURCE_DIR}/tests)
detinfer_link_modules(bench_chat session devtools)
