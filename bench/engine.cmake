# Compares against libtorch (torch::mm / the fast mode): only with DETINFER_WITH_TORCH.
if(NOT DETINFER_HAVE_TORCH)
  return()
endif()
# bench_engine: decode tokens/s of a DeterministicSession on a Qwen2.5-0.5B-shaped bf16
# model generated in /tmp: batch 1 canonical vs fast, and the aggregate over 16
# concurrent sequences (continuous batching) vs batch 1, ratios from one run
# (docs/performance.md, "Decoding and batching"). A plain program: one model load dwarfs
# Google Benchmark's iteration logic.
add_executable(bench_engine ${CMAKE_CURRENT_LIST_DIR}/bench_engine.cpp)
target_link_libraries(bench_engine PRIVATE detinfer_flags Threads::Threads)
detinfer_link_modules(bench_engine session devtools)
