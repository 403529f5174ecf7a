#include "decode/stop_matcher.h"

#include <gtest/gtest.h>

namespace detinfer::decode {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces, bool* stopped,
                 std::vector<std::string>* emitted = nullptr) {
  std::string out;
  for (const std::string& p : pieces) {
    const StopMatcher::Result r = m.push(p);
    out += r.emit;
    if (emitted) emitted->push_back(r.emit);
    if (r.stopped) {
      *stopped = true;
      return out;
    }
  }
  *stopped = false;
  return out + m.flush();
}

TEST(StopMatcher, MatchesAcrossTokenBoundariesAndTrims) {
  StopMatcher m({"END"});
  bool stopped = false;
  std::vector<std::string> emitted;
  EXPECT_EQ(feed(m, {"hello E", "N", "D more"}, &stopped, &emitted), "hello ");
  EXPECT_TRUE(stopped);
  // "E" was held back until it was known to start the stop string.
  EXPECT_EQ(emitted[0], "hello ");
  EXPECT_EQ(emitted[1], "");
}

TEST(StopMatcher, ReleasesHeldTextWhenItDoesNotMatch) {
  StopMatcher m({"END"});
  bool stopped = false;
  std::vector<std::string> emitted;
  EXPECT_EQ(feed(m, {"x E", "Nd", " EN"}, &stopped, &emitted), "x ENd EN");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(emitted[0], "x ");
  EXPECT_EQ(emitted[1], "ENd");
  EXPECT_EQ(emitted[2], " ");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"bc", "abcd", "\n"});
  bool stopped = false;
  EXPECT_EQ(feed(m, {"zab", "cd\n"}, &stopped), "z");  // "abcd" starts first
  EXPECT_TRUE(stopped);
  StopMatcher none({});
  EXPECT_EQ(feed(none, {"a", "b"}, &stopped), "ab");
  EXPECT_FALSE(stopped);
}

TEST(StopMatcher, NothingAfterStop) {
  StopMatcher m({"."});
  EXPECT_TRUE(m.push("a.b").stopped);
  EXPECT_EQ(m.push("more").emit, "");
  EXPECT_EQ(m.flush(), "");
}

}  // namespace
}  // namespace detinfer::decode
