#include "session/distribution_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/engine.h"
#include "kernels/kernels.h"

namespace detinfer::session {

RowDistribution row_distribution(const float* row, std::int64_t vocab) {
  RowDistribution d;
  if (vocab <= 0) return d;
  float mf = kernels::max_value(row, vocab);  // NaN only when row[0] is: then the others'
  if (mf != mf && vocab > 1) mf = kernels::max_value(row + 1, vocab - 1);
  if (!std::isfinite(mf)) return d;
  const double m = mf;
  // e^(x - m) in binary32 (the kernels' exp, a chunk at a time), summed in double: a
  // metric, never an input of numerics; NaN and -inf entries count as probability 0.
  constexpr std::int64_t kChunk = 1024;
  float e[kChunk];
  double s = 0;
  double t = 0;  // sum of e^(x - m) * (x - m)
  for (std::int64_t c = 0; c < vocab; c += kChunk) {
    const std::int64_t len = std::min(kChunk, vocab - c);
    kernels::exp_sub(row + c, mf, e, len);
    for (std::int64_t i = 0; i < len; ++i) {
      if (!(row[c + i] > -std::numeric_limits<float>::infinity())) continue;
      s += e[i];
      t += static_cast<double>(e[i]) * (static_cast<double>(row[c + i]) - m);
    }
  }
  d.top1 = 1.0 / s;
  d.entropy = std::max(0.0, std::log(s) - t / s);
  return d;
}

DistributionStats::DistributionStats(MetricsRegistry& registry, std::int32_t interval,
                                     std::int32_t window)
    : top1_(registry.histogram(
          "detinfer_top1_probability",
          "Probability of the most likely next token (softmax of the raw logits), sampled steps",
          {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99})),
      entropy_(registry.histogram("detinfer_token_entropy_nats",
                                  "Entropy of the next-token distribution in nats, sampled steps",
                                  {0.01, 0.1, 0.25, 0.5, 1, 2, 3, 4, 6, 8, 12})),
      variance_(registry.gauge("detinfer_top1_probability_variance",
                               "Variance of the top-1 probability over the last window of "
                               "sampled steps (0 before two observations)")),
      interval_(std::max(1, interval)),
      ring_(static_cast<std::size_t>(std::max(2, window))) {}

void DistributionStats::on_logits(const engine::EngineRequest& r, std::int32_t, std::int32_t step,
                                  const float* row, std::int64_t vocab) {
  if (!r.observed || step % interval_ != 0) return;
  const RowDistribution d = row_distribution(row, vocab);
  top1_.observe(d.top1);
  entropy_.observe(d.entropy);
  ring_[next_] = d.top1;
  next_ = (next_ + 1) % ring_.size();
  count_ = std::min(count_ + 1, ring_.size());
  if (count_ < 2) return;
  // Two passes over at most `window` values: exact enough, and cheap next to the step.
  double mean = 0;
  for (std::size_t i = 0; i < count_; ++i) mean += ring_[i];
  mean /= static_cast<double>(count_);
  double var = 0;
  for (std::size_t i = 0; i < count_; ++i) var += (ring_[i] - mean) * (ring_[i] - mean);
  variance_.set(var / static_cast<double>(count_));
}

}  // namespace detinfer::session
