// The names of FinishReason: one spelling each, and parse inverts it.
#include "core/vocabulary.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "detinfer/generation.h"

namespace detinfer {
namespace {

TEST(Vocabulary, FinishReasonNamesRoundTrip) {
  EXPECT_STREQ(to_string(FinishReason::kLength), "length");
  EXPECT_STREQ(to_string(FinishReason::kStop), "stop");
  EXPECT_STREQ(to_string(FinishReason::kCancelled), "cancelled");
  std::set<std::string> names;
  for (FinishReason r : {FinishReason::kLength, FinishReason::kStop, FinishReason::kCancelled}) {
    EXPECT_EQ(core::parse_finish_reason(to_string(r)), r);
    names.insert(to_string(r));
  }
  EXPECT_EQ(names.size(), 3u);
  EXPECT_EQ(core::parse_finish_reason("Length"), std::nullopt);
  EXPECT_EQ(core::parse_finish_reason(""), std::nullopt);
  EXPECT_EQ(core::parse_finish_reason("unknown"), std::nullopt);
  EXPECT_STREQ(to_string(static_cast<FinishReason>(9)), "unknown");
}

}  // namespace
}  // namespace detinfer
