// The Thinking Machines experiment in miniature: one greedy 64-token request submitted
// 200 times amid random background traffic gives exactly one distinct output in
// canonical mode. Fast mode's count is a measurement, not a property: bench_consistency.
#include <gtest/gtest.h>

#include "session/consistency_workload.h"

namespace detinfer {
namespace {

using testing::distinct_outputs;

TEST(SessionConsistency, TwoHundredGreedyRunsAmidTrafficGiveOneOutput) {
  EXPECT_EQ(distinct_outputs(NumericsMode::kCanonical, 200, 64), 1u);
}

}  // namespace
}  // namespace detinfer
