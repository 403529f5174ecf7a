#include "decode/logits_processor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace detinfer::decode {
namespace {

TEST(Penalties, RepetitionPenaltyHuggingFaceSemantics) {
  GenerationConfig c;
  c.repetition_penalty = 2.0f;
  std::vector<float> row = {1.0f, -1.0f, 4.0f, -3.0f, 0.5f};
  // Token 2 appears twice and is penalized once; token 3 only in the prompt.
  apply_penalties(c, {3, 2}, {2, 1, 2}, row.data(), 5);
  EXPECT_EQ(row, (std::vector<float>{1.0f, -2.0f, 2.0f, -6.0f, 0.5f}));
}

TEST(Penalties, PresenceAndFrequencyOpenAiSemanticsOverGeneratedOnly) {
  GenerationConfig c;
  c.presence_penalty = 0.5f;
  c.frequency_penalty = 0.25f;
  std::vector<float> row = {1.0f, 1.0f, 1.0f, 1.0f};
  apply_penalties(c, {0, 0, 0}, {1, 2, 2, 2, 7}, row.data(), 4);  // 7: out of range
  EXPECT_EQ(row[0], 1.0f);                                        // prompt tokens do not count
  EXPECT_EQ(row[1], 1.0f - (1 * 0.25f + 0.5f));                   // count 1
  EXPECT_EQ(row[2], 1.0f - (3 * 0.25f + 0.5f));                   // count 3
  EXPECT_EQ(row[3], 1.0f);
}

TEST(Warpers, TemperatureDividesAndEverythingSurvivesByDefault) {
  GenerationConfig c;
  c.temperature = 0.5f;
  const std::vector<float> row = {1.0f, -2.0f, 3.0f};
  const Candidates k = apply_warpers(c, row.data(), 3);
  EXPECT_EQ(k.ids, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(k.logits, (std::vector<float>{2.0f, -4.0f, 6.0f}));
}

TEST(Warpers, TopKKeepsTiesAtTheThreshold) {
  GenerationConfig c;
  c.temperature = 1.0f;
  c.top_k = 2;
  const std::vector<float> row = {1.0f, 3.0f, 2.0f, 2.0f, 0.0f};
  EXPECT_EQ(apply_warpers(c, row.data(), 5).ids, (std::vector<std::int32_t>{1, 2, 3}));
  c.top_k = 1;
  EXPECT_EQ(apply_warpers(c, row.data(), 5).ids, (std::vector<std::int32_t>{1}));
}

TEST(Warpers, TopPKeepsSmallestPrefixReachingP) {
  GenerationConfig c;
  c.temperature = 1.0f;
  // Probabilities ~ {0.5, 0.25, 0.125, 0.125} via log-values.
  const std::vector<float> row = {std::log(0.125f), std::log(0.5f), std::log(0.125f),
                                  std::log(0.25f)};
  c.top_p = 0.7f;
  EXPECT_EQ(apply_warpers(c, row.data(), 4).ids, (std::vector<std::int32_t>{1, 3}));
  c.top_p = 0.8f;  // needs a third token: the tie goes to the lower id (0)
  EXPECT_EQ(apply_warpers(c, row.data(), 4).ids, (std::vector<std::int32_t>{0, 1, 3}));
  c.top_p = 0.01f;  // at least one token survives
  EXPECT_EQ(apply_warpers(c, row.data(), 4).ids, (std::vector<std::int32_t>{1}));
}

TEST(Warpers, MinPRelativeToTheMostLikely) {
  GenerationConfig c;
  c.temperature = 1.0f;
  const std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  c.min_p = 0.2f;  // threshold 0.1
  EXPECT_EQ(apply_warpers(c, row.data(), 4).ids, (std::vector<std::int32_t>{0, 1, 2}));
}

TEST(Warpers, FixedOrderTopKThenTopPThenMinP) {
  GenerationConfig c;
  c.temperature = 1.0f;
  c.top_k = 3;
  c.top_p = 0.9f;
  c.min_p = 0.3f;
  const std::vector<float> row = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  // top_k -> {0,1,2} renormalized {4/9,3/9,2/9}; top_p 0.9 keeps all three (cum 1.0 only
  // reached at the third); min_p 0.3 * 4/9 = 0.133 keeps all three too.
  EXPECT_EQ(apply_warpers(c, row.data(), 4).ids, (std::vector<std::int32_t>{0, 1, 2}));
  c.min_p = 0.6f;  // 0.6 * 4/9 = 0.267: drops token 2 (2/9 = 0.222)
  EXPECT_EQ(apply_warpers(c, row.data(), 4).ids, (std::vector<std::int32_t>{0, 1}));
}

}  // namespace
}  // namespace detinfer::decode
