// The model folder a benchmark runs on: --model DIR as given, or the --shape ("tiny" or
// "qwen05b": Qwen2.5-0.5B, bf16, random weights) generated into $TMPDIR/<prefix><shape>;
// the batch-1 session and greedy workload the transcript and speculative benchmarks
// share; and the median of repeated timings.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "qwen05b_shape.h"

namespace detinfer_bench {

inline std::string shape_model_dir(const std::string& model, const std::string& shape,
                                   const std::string& prefix) {
  if (!model.empty()) return model;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + prefix + shape;
  detinfer::devtools::TinyModelOptions o =
      shape == "qwen05b" ? qwen05b_bf16_options(dir) : detinfer::devtools::TinyModelOptions{};
  o.out_dir = dir;
  if (shape == "tiny") o.max_positions = 4096;
  detinfer::devtools::make_tiny_model(o);
  return dir;
}

// One sequence at a time, no caches, no recorder or distribution statistics.
inline detinfer::SessionOptions batch1_options(std::int32_t threads) {
  detinfer::SessionOptions so;
  so.threads = threads;
  so.max_batch = 1;
  so.cache.prefix.enabled = false;
  so.recorder.level = detinfer::RecordLevel::kOff;
  so.distribution_interval = 0;
  return so;
}

// A fixed prompt of `n` ids and greedy decoding of `tokens` tokens past eos.
inline std::vector<std::int32_t> bench_prompt(std::int32_t n) {
  std::vector<std::int32_t> prompt;
  for (std::int32_t i = 0; i < n; ++i) prompt.push_back((7 * i + 3) % 250);
  return prompt;
}
inline detinfer::GenerationConfig greedy_past_eos(std::int32_t tokens) {
  detinfer::GenerationConfig c;
  c.max_new_tokens = tokens;
  c.ignore_eos = true;
  return c;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace detinfer_bench
