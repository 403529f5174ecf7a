// The Qwen2.5-0.5B shape the benchmarks generate (bf16, random weights from a seed):
// hidden 896, intermediate 4864, 24 layers, 14 heads, 2 KV heads, vocab 151936, tied
// embeddings.
#pragma once

#include <string>

#include "devtools/model_tools.h"

namespace detinfer_bench {

inline detinfer::devtools::TinyModelOptions qwen05b_bf16_options(const std::string& dir) {
  detinfer::devtools::TinyModelOptions o;
  o.arch = detinfer::devtools::TinyArch::kQwen2;
  o.dtype = detinfer::core::DType::kBF16;
  o.hidden = 896;
  o.intermediate = 4864;
  o.layers = 24;
  o.heads = 14;
  o.kv_heads = 2;
  o.vocab = 151936;
  o.max_positions = 32768;
  o.rope_theta = 1000000.0;
  o.tie_word_embeddings = true;
  o.seed = 1;
  o.out_dir = dir;
  return o;
}

}  // namespace detinfer_bench
