# bench_embedding: a tied embedding row from the table vs from the packed lm_head.
add_executable(bench_embedding ${CMAKE_CURRENT_LIST_DIR}/bench_embedding.cpp)
target_link_libraries(bench_embedding PRIVATE detinfer_flags benchmark::benchmark Threads::Threads)
detinfer_link_modules(bench_embedding model)
# Compares against libtorch (torch::mm / the fast mode): only with DETINFER_WITH_TORCH.
if(NOT DETINFER_HAVE_TORCH)
  return()
endif()
# bench_model: load time, peak RSS and fingerprint share of Model::load, and prefill/decode
# tokens/s (canonical vs fast, 1 and 2 threads) vs the read-bandwidth limit, for a
# Qwen2.5-0.5B-shaped bf16 model generated in /tmp (docs/performance.md, "Model loading
# and forward pass"). A plain program rather than a Google Benchmark one: peak RSS needs
# a fresh process per load (fork), and one model load dwarfs benchmark's iteration logic.
add_executable(bench_model ${CMAKE_CURRENT_LIST_DIR}/bench_model.cpp)
target_link_libraries(bench_model PRIVATE detinfer_flags Threads::Threads)
detinfer_link_modules(bench_model model devtools)
