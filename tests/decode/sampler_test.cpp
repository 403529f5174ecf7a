#include "decode/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "detinfer/philox.h"
#include "kernels/kernels.h"

namespace detinfer::decode {
namespace {

TEST(Sampler, GreedyTakesLowestIdOfTiesAndReportsLogprob) {
  GenerationConfig c;  // temperature 0
  c.logprobs = 2;
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f};
  const TokenChoice t = choose_token(c, row.data(), 4, {}, {}, 0, 0, 0);
  EXPECT_EQ(t.token, 1);
  const double lse = std::log(std::exp(0.5) + 2 * std::exp(2.0) + std::exp(-1.0));
  EXPECT_NEAR(t.logprob, 2.0 - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].token, 1);
  EXPECT_EQ(t.top[1].token, 3);
  EXPECT_EQ(t.top[0].logprob, t.logprob);
}

TEST(Sampler, GreedyAppliesPenalties) {
  GenerationConfig c;
  c.repetition_penalty = 4.0f;
  const std::vector<float> row = {1.0f, 2.0f, 0.0f};
  EXPECT_EQ(choose_token(c, row.data(), 3, {}, {1}, 0, 0, 0).token, 0);
}

// Without top logprobs the greedy logprob is log_softmax_at (no full log-softmax row);
// it must have exactly the bits of the full row's element, with and without penalties,
// and the token must be the same as with top logprobs asked for.
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(Sampler, GreedyLogprobWithoutTopHasTheFullLogSoftmaxBits) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const std::int64_t vocab = 1 + static_cast<std::int64_t>(seed * 977 % 5000);
    std::vector<float> row(static_cast<std::size_t>(vocab));
    for (std::int64_t i = 0; i < vocab; ++i) {
      row[static_cast<std::size_t>(i)] =
          20.0f * philox_uniform(seed, 0, static_cast<std::uint64_t>(i), 0) - 10.0f;
    }
    for (const float rp : {1.0f, 1.3f}) {
      GenerationConfig c;
      c.repetition_penalty = rp;
      const std::vector<std::int32_t> prompt = {0, static_cast<std::int32_t>(vocab - 1)};
      const TokenChoice t = choose_token(c, row.data(), vocab, prompt, {}, 0, 0, 0);
      std::vector<float> penalized = row;
      apply_penalties(c, prompt, {}, penalized.data(), vocab);
      std::vector<float> lp(row.size());
      kernels::log_softmax(penalized.data(), lp.data(), vocab);
      ASSERT_EQ(t.token, kernels::argmax(penalized.data(), vocab));
      ASSERT_EQ(bits(t.logprob), bits(lp[static_cast<std::size_t>(t.token)]))
          << "vocab " << vocab << " rp " << rp;
      c.logprobs = 3;
      const TokenChoice full = choose_token(c, row.data(), vocab, prompt, {}, 0, 0, 0);
      EXPECT_EQ(full.token, t.token);
      EXPECT_EQ(bits(full.logprob), bits(t.logprob));
    }
  }
}

// Verification asks for the token alone (LogprobNeed::kSkip): the same token as with the
// logprob computed, for greedy rows with ties, penalties and a mask, and for seeded draws.
TEST(Sampler, SkippingTheLogprobKeepsTheToken) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const std::int64_t vocab = 2 + static_cast<std::int64_t>(seed * 613 % 3000);
    std::vector<float> row(static_cast<std::size_t>(vocab));
    for (std::int64_t i = 0; i < vocab; ++i) {  // coarse values: many exact ties
      const float u = philox_uniform(seed, 1, static_cast<std::uint64_t>(i), 0);
      row[static_cast<std::size_t>(i)] = std::floor(8.0f * u) - 4.0f;
    }
    std::vector<std::uint8_t> allowed(static_cast<std::size_t>(vocab), 1);
    allowed[static_cast<std::size_t>(seed % static_cast<std::uint64_t>(vocab))] = 0;
    GenerationConfig c;
    c.repetition_penalty = seed % 2 == 0 ? 1.0f : 1.5f;
    c.temperature = seed % 3 == 0 ? 0.8f : 0.0f;
    const std::vector<std::int32_t> prompt = {0, 1};
    const std::vector<std::int32_t> generated = {static_cast<std::int32_t>(vocab - 1)};
    for (const std::vector<std::uint8_t>* mask :
         {static_cast<decltype(&allowed)>(nullptr), static_cast<decltype(&allowed)>(&allowed)}) {
      SamplingWorkspace a, b;
      const TokenChoice full =
          choose_token(c, row.data(), vocab, prompt, generated, seed, 0, 7, a, mask);
      const TokenChoice only = choose_token(c, row.data(), vocab, prompt, generated, seed, 0, 7, b,
                                            mask, LogprobNeed::kSkip);
      EXPECT_EQ(only.token, full.token) << "seed " << seed;
      if (c.temperature == 0.0f) {
        EXPECT_EQ(only.logprob, 0.0f);
      }
    }
  }
}

TEST(Sampler, DrawIsAPureFunctionOfSeedStreamStep) {
  Candidates c;
  for (int i = 0; i < 50; ++i) {
    c.ids.push_back(i * 3);
    c.logits.push_back(std::sin(static_cast<float>(i)) * 2.0f);
  }
  std::vector<std::size_t> a, b, other_stream, other_seed;
  for (std::uint64_t step = 0; step < 64; ++step) {
    a.push_back(draw_index(c, 42, 0, step));
    b.push_back(draw_index(c, 42, 0, step));
    other_stream.push_back(draw_index(c, 42, 1, step));
    other_seed.push_back(draw_index(c, 43, 0, step));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other_stream);
  EXPECT_NE(a, other_seed);
}

// docs/sampling.md section 4 written out with a full sort.
std::size_t reference_draw(const Candidates& c, std::uint64_t seed, std::uint64_t stream,
                           std::uint64_t step) {
  const std::vector<float> p = candidate_probs(c);
  std::vector<std::size_t> order(p.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return p[a] != p[b] ? p[a] > p[b] : c.ids[a] < c.ids[b];
  });
  const float u = philox_uniform(seed, stream, step, 0);
  float cum = 0.0f;
  for (const std::size_t i : order) {
    cum = cum + p[i];
    if (cum > u) return i;
  }
  return order.back();
}

TEST(Sampler, DrawEqualsTheDocumentedDefinition) {
  Candidates c;
  for (int i = 0; i < 300; ++i) {
    c.ids.push_back(i);
    // Coarse values: many ties in probability, broken by id.
    c.logits.push_back(static_cast<float>((i * 7919) % 13) * 0.5f);
  }
  for (std::uint64_t seed = 0; seed < 500; ++seed) {
    EXPECT_EQ(draw_index(c, seed, seed % 3, seed / 3), reference_draw(c, seed, seed % 3, seed / 3));
  }
}

TEST(Sampler, EmpiricalFrequenciesMatchProcessedDistribution) {
  // A fixed small logits vector, processed by temperature + top_k (token 5 is cut).
  GenerationConfig cfg;
  cfg.temperature = 0.8f;
  cfg.top_k = 5;
  const std::vector<float> row = {1.0f, 0.2f, -0.5f, 1.7f, 0.9f, -2.0f};
  const Candidates c = apply_warpers(cfg, row.data(), 6);
  ASSERT_EQ(c.size(), 5u);
  const std::vector<float> p = candidate_probs(c);
  std::map<std::int32_t, int> counts;
  const int kDraws = 40000;
  for (int s = 0; s < kDraws; ++s) {
    const TokenChoice t = choose_token(cfg, row.data(), 6, {}, {}, 1000 + s, 0, s % 7);
    ++counts[t.token];
  }
  EXPECT_EQ(counts.count(5), 0u);
  double chi2 = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double expected = p[i] * kDraws;
    const double d = counts[c.ids[i]] - expected;
    chi2 += d * d / expected;
  }
  // 4 degrees of freedom: the 0.1% critical value is 18.47.
  EXPECT_LT(chi2, 18.47) << "chi-square " << chi2;
}

TEST(Sampler, SampledLogprobIsUnderTheProcessedDistribution) {
  GenerationConfig cfg;
  cfg.temperature = 0.5f;
  cfg.top_k = 2;
  cfg.logprobs = 3;
  const std::vector<float> row = {1.0f, 0.0f, 0.5f};
  const TokenChoice t = choose_token(cfg, row.data(), 3, {}, {}, 7, 0, 0);
  // Candidates {0: 2.0, 2: 1.0} after temperature.
  const double lse = std::log(std::exp(2.0) + std::exp(1.0));
  const double expected = (t.token == 0 ? 2.0 : 1.0) - lse;
  EXPECT_NEAR(t.logprob, expected, 1e-6);
  ASSERT_EQ(t.top.size(), 2u);  // only two candidates survive
  EXPECT_EQ(t.top[0].token, 0);
  EXPECT_EQ(t.top[1].token, 2);
}

TEST(Sampler, FirstSampleIndexShiftsTheStream) {
  GenerationConfig cfg;
  cfg.temperature = 1.0f;
  std::vector<float> row(100);
  for (int i = 0; i < 100; ++i) row[i] = std::cos(static_cast<float>(i));
  GenerationConfig shifted = cfg;
  shifted.first_sample_index = 3;
  for (std::uint64_t step = 0; step < 20; ++step) {
    EXPECT_EQ(choose_token(cfg, row.data(), 100, {}, {}, 5, 3, step).token,
              choose_token(shifted, row.data(), 100, {}, {}, 5, 0, step).token);
  }
}

TEST(Sampler, TopLogprobsSkipsMaskedAndOrdersTies) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> lp = {-1.0f, ninf, -0.5f, -1.0f};
  const std::vector<std::int32_t> ids = {10, 11, 12, 13};
  const auto top = top_logprobs(lp, ids, 5);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 12);
  EXPECT_EQ(top[1].token, 10);
  EXPECT_EQ(top[2].token, 13);
}

}  // namespace
}  // namespace detinfer::decode
