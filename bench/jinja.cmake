# bench_jinja: render time of the Qwen3 chat template for a 20-message conversation with
# tools (bench/jinja_conversation.json); bench/bench_jinja_vs_python.py runs it next to
# Python Jinja2 on the same input (docs/performance.md, "Chat templates").
add_executable(bench_jinja ${CMAKE_CURRENT_LIST_DIR}/bench_jinja.cpp)
target_link_libraries(bench_jinja PRIVATE detinfer_flags benchmark::benchmark Threads::Threads
  nlohmann_json::nlohmann_json)
target_compile_definitions(bench_jinja PRIVATE DETINFER_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
detinfer_link_modules(bench_jinja jinja)
