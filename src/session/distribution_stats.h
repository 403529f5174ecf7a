// Next-token distribution metrics (docs/metrics.md, "Distribution statistics"): for
// every Nth generated token of each sequence, the top-1 probability and the entropy of
// the softmax of its raw logits row, as histograms, and the variance of the top-1
// probability over a sliding window as a gauge (alert-ready: a model, input or numerics
// change moves it). Metrics never feed numerics.
#pragma once

#include <cstdint>
#include <vector>

#include "detinfer/metrics.h"
#include "engine/engine_hooks.h"

namespace detinfer::session {

// Softmax statistics of one logits row: top-1 probability and entropy (nats).
struct RowDistribution {
  double top1 = 0;
  double entropy = 0;
};
// From the row's largest non-NaN value: e^(x - m) with the kernels' binary32 exp, summed in
// double (relative error ~1e-6: a metric); NaN and -inf entries count as probability 0.
RowDistribution row_distribution(const float* row, std::int64_t vocab);

class DistributionStats final : public engine::EngineObserver {
 public:
  // Observes tokens whose step is a multiple of `interval` (>= 1); the variance covers
  // the last `window` (>= 2) observations.
  DistributionStats(MetricsRegistry& registry, std::int32_t interval, std::int32_t window);
  bool wants_logits() const override { return true; }
  void on_logits(const engine::EngineRequest& r, std::int32_t sample_index, std::int32_t step,
                 const float* row, std::int64_t vocab) override;

 private:
  Histogram top1_;
  Histogram entropy_;
  Gauge variance_;
  std::int32_t interval_;
  std::vector<double> ring_;  // engine thread only
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

}  // namespace detinfer::session
