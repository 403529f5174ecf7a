// The time-to-first-token workload shared by bench_cache_ttft (engine) and
// bench_session_cache (session): a Qwen2.5-0.5B-layer-shaped model (hidden 896, 14 heads,
// 2 KV heads, head_dim 64, intermediate 4864) with 4 of its 24 layers and a 32000-token
// vocabulary, and a 2048-token prompt whose first 1920 tokens are shared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "devtools/model_tools.h"

namespace detinfer::bench {

inline devtools::TinyModelOptions ttft_model_options(const std::string& out_dir,
                                                     core::DType dtype = core::DType::kF32) {
  devtools::TinyModelOptions o;
  o.arch = devtools::TinyArch::kQwen2;
  o.dtype = dtype;
  o.hidden = 896;
  o.intermediate = 4864;
  o.layers = 4;
  o.heads = 14;
  o.kv_heads = 2;
  o.vocab = 32000;
  o.max_positions = 4096;
  o.out_dir = out_dir;
  return o;
}

// Token ids in [300, 31300) from an LCG, continuing from `x`.
inline std::int32_t next_ttft_token(std::uint32_t& x) {
  x = x * 1664525u + 1013904223u;
  return static_cast<std::int32_t>(300 + (x >> 8) % 31000);
}

inline std::vector<std::int32_t> ttft_prompt() {  // 2048 tokens
  std::vector<std::int32_t> p;
  std::uint32_t x = 99;
  while (p.size() < 2048) p.push_back(next_ttft_token(x));
  return p;
}

// The first 1920 tokens of `prompt` and a fresh 128-token tail (from `x`), so that exactly
// the 1920 shared tokens can hit the cache.
inline std::vector<std::int32_t> with_fresh_tail(const std::vector<std::int32_t>& prompt,
                                                 std::uint32_t& x) {
  std::vector<std::int32_t> p(prompt.begin(), prompt.begin() + 1920);
  while (p.size() < 2048) p.push_back(next_ttft_token(x));
  return p;
}

}  // namespace detinfer::bench
