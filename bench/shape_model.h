// The model folder a benchmark runs on: --model DIR as given, or the --shape ("tiny" or
// "qwen05b": Qwen2.5-0.5B, bf16, random weights) generated into $TMPDIR/<prefix><shape>;
// and the median of repeated timings.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

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

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace detinfer_bench
