// Next-token distribution metrics: the top-1 probability histogram sums exactly the
// probabilities the logprobs report, entropy stays in [0, log vocab], the variance
// gauge is the window's variance; row_distribution on known rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "session/distribution_stats.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

double sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

TEST(DistributionStats, KnownRows) {
  const float uniform[4] = {1, 1, 1, 1};
  session::RowDistribution d = session::row_distribution(uniform, 4);
  EXPECT_DOUBLE_EQ(d.top1, 0.25);
  EXPECT_NEAR(d.entropy, std::log(4.0), 1e-12);
  const float peaked[3] = {0, -std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  d = session::row_distribution(peaked, 3);
  EXPECT_DOUBLE_EQ(d.top1, 1.0);
  EXPECT_DOUBLE_EQ(d.entropy, 0.0);
}

// Against the statistics in double (std::exp) on a vocabulary-sized random row, with a
// NaN first (skipped) and -inf entries (probability 0): within the binary32 exp's error.
TEST(DistributionStats, MatchesDoublePrecisionOnALargeRow) {
  const std::int64_t n = 151936;
  std::vector<float> row(static_cast<std::size_t>(n));
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (float& v : row) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<double>(state >> 40) / 16777216.0 * 24.0 - 12.0);
  }
  row[0] = std::nanf("");
  row[77] = -std::numeric_limits<float>::infinity();
  row[n - 1] = 14.5f;
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(row[i]));
  double s = 0, t = 0;
  for (std::int64_t i = 1; i < n; ++i) {
    const double x = static_cast<double>(row[i]) - m;
    if (!(x > -std::numeric_limits<double>::infinity())) continue;
    s += std::exp(x);
    t += std::exp(x) * x;
  }
  const session::RowDistribution d = session::row_distribution(row.data(), n);
  EXPECT_NEAR(d.top1, 1.0 / s, 1e-6 / s);
  EXPECT_NEAR(d.entropy, std::log(s) - t / s, 1e-6);
  EXPECT_GT(d.entropy, 1.0);  // a spread row: not a degenerate case
}

TEST(DistributionStats, SessionMetricsFollowTheLogprobs) {
  SessionOptions o = testing::tiny_options();
  o.distribution_interval = 1;
  o.distribution_window = 4;
  DeterministicSession s = DeterministicSession::open(testing::tiny_model_dir(), o);
  GenerationConfig g;
  g.max_new_tokens = 6;
  g.ignore_eos = true;
  g.logprobs = 1;
  const GenerationResult r = s.generate(std::vector<std::int32_t>{5, 6, 7, 8}, g);
  ASSERT_EQ(r.sequences[0].logprobs.size(), 6u);
  double sum = 0;
  std::vector<double> p;
  for (const auto& step : r.sequences[0].logprobs) {
    p.push_back(std::exp(static_cast<double>(step.top.at(0).logprob)));
    sum += p.back();
  }
  const std::string text = s.metrics_text();
  EXPECT_EQ(sample(text, "detinfer_top1_probability_count"), 6);
  EXPECT_NEAR(sample(text, "detinfer_top1_probability_sum"), sum, 1e-5);
  EXPECT_EQ(sample(text, "detinfer_token_entropy_nats_count"), 6);
  const double h = sample(text, "detinfer_token_entropy_nats_sum");
  EXPECT_GE(h, 0);
  EXPECT_LE(h, 6 * std::log(static_cast<double>(s.vocab_size())) + 1e-9);
  // The window holds the last 4 observations.
  double mean = 0, var = 0;
  for (std::size_t i = 2; i < 6; ++i) mean += p[i] / 4;
  for (std::size_t i = 2; i < 6; ++i) var += (p[i] - mean) * (p[i] - mean) / 4;
  EXPECT_NEAR(sample(text, "detinfer_top1_probability_variance"), var, 1e-6);

  SessionOptions off = testing::tiny_options();
  off.distribution_interval = 0;
  DeterministicSession quiet = DeterministicSession::open(testing::tiny_model_dir(), off);
  quiet.generate(std::vector<std::int32_t>{5, 6, 7, 8}, g);
  EXPECT_EQ(quiet.metrics_text().find("detinfer_top1_probability"), std::string::npos);
  SessionOptions bad = testing::tiny_options();
  bad.distribution_window = 1;
  EXPECT_THROW(DeterministicSession::open(testing::tiny_model_dir(), bad), Error);
}

}  // namespace
}  // namespace detinfer
