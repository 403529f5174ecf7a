// RoPE cos/sin rows, one per position (docs/numerics.md): inverse frequencies, the
// rope_scaling types (linear, dynamic, llama3, yarn, longrope), angles, cos/sin and the
// attention factor are computed in double (pow, log, sin and cos by rope_math.h, never the
// C library) and rounded once to float, so the table is a pure function of
// (config, position) on every platform.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace detinfer::model {

class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& config);

  std::int64_t half() const { return half_; }
  // Positions covered so far (rows of the table).
  std::int64_t size() const { return size_; }
  // Grows the table to cover positions [0, n). Not thread-safe; call before using rows.
  void ensure(std::int64_t n);
  // Bytes the cos/sin rows hold.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((cos_.capacity() + sin_.capacity()) * sizeof(float));
  }
  const float* cos(std::int64_t pos) const { return cos_.data() + pos * half_; }
  const float* sin(std::int64_t pos) const { return sin_.data() + pos * half_; }

  // The inverse frequencies in double (exposed for tests).
  const std::vector<double>& inv_freq() const { return inv_freq_; }
  // What cos and sin are multiplied by (yarn, longrope; 1 otherwise).
  double attention_factor() const { return attention_factor_; }

 private:
  std::int64_t half_;
  std::int64_t size_ = 0;
  std::vector<double> inv_freq_;
  double attention_factor_ = 1.0;
  std::vector<float> cos_;
  std::vector<float> sin_;
};

}  // namespace detinfer::model
