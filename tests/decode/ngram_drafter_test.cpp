// The prompt-lookup drafter (docs/speculative.md): which tokens it proposes.
#include "decode/ngram_drafter.h"

#include <gtest/gtest.h>

namespace detinfer::decode {
namespace {

using Ids = std::vector<std::int32_t>;

Ids draft(const Ids& prompt, const Ids& generated, std::int32_t lo, std::int32_t hi,
          std::int32_t max) {
  Ids out = {99};  // cleared by the drafter
  ngram_draft(prompt, generated, lo, hi, max, out);
  return out;
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  // Text: 1 2 3 4 5 | 1 2 3 6 7 | 1 2 3 -> the last "1 2 3" is followed by "6 7 1 2 3".
  const Ids prompt = {1, 2, 3, 4, 5, 1, 2, 3, 6, 7};
  EXPECT_EQ(draft(prompt, {1, 2, 3}, 1, 3, 4), (Ids{6, 7, 1, 2}));
  EXPECT_EQ(draft(prompt, {1, 2, 3}, 1, 3, 7), (Ids{6, 7, 1, 2, 3, 6, 7}));
  EXPECT_EQ(draft(prompt, {1, 2, 3}, 1, 3, 2), (Ids{6, 7}));
  // The text spans the prompt and the generated tokens alike.
  EXPECT_EQ(draft({1, 2}, {3, 4, 5, 1, 2, 3, 6, 7, 1, 2, 3}, 1, 3, 4), (Ids{6, 7, 1, 2}));
}

TEST(NgramDrafter, LongerNgramsWinAndShorterOnesAreTheFallback) {
  // "8 3" occurs once, followed by 9; "3" alone last occurred before 4.
  const Ids prompt = {8, 3, 9, 0, 3, 4};
  EXPECT_EQ(draft(prompt, {8, 3}, 1, 2, 1), (Ids{9}));
  EXPECT_EQ(draft(prompt, {5, 3}, 1, 2, 1), (Ids{4}));  // no "5 3": the unigram "3"
  EXPECT_EQ(draft(prompt, {5, 3}, 2, 2, 1), (Ids{}));   // bigrams only: nothing
  EXPECT_EQ(draft(prompt, {7}, 1, 3, 4), (Ids{}));      // 7 never occurred
}

TEST(NgramDrafter, RepeatingPatternsRunIntoTheSuffixAndEdgesAreEmpty) {
  // A period-2 pattern: the copy runs on past the text's end and repeats the period.
  EXPECT_EQ(draft({}, {5, 6, 5, 6, 5, 6}, 1, 3, 5), (Ids{5, 6, 5, 6, 5}));
  EXPECT_EQ(draft({7, 7}, {}, 1, 3, 3), (Ids{7, 7, 7}));
  EXPECT_EQ(draft({}, {}, 1, 3, 4), (Ids{}));
  EXPECT_EQ(draft({4}, {}, 1, 3, 4), (Ids{}));
  EXPECT_EQ(draft({1, 2, 1, 2}, {}, 1, 3, 0), (Ids{}));
}

}  // namespace
}  // namespace detinfer::decode
