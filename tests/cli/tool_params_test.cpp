// The server's tool-call answer (tools/detinfer/server/tool_params.h), linked directly:
// parallel_tool_calls false keeps the first call, a forced call cut by max_tokens stays
// its text, content beside calls, ids from (seed, choice, call), no parsing without tools.
#include "tool_params.h"

#include <gtest/gtest.h>

namespace detinfer_cli {
namespace {

const std::string kTwoCalls =
    "Checking.<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>"
    "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";

TEST(ToolMessage, ParallelCallsAndContent) {
  ToolRequest t;
  t.parse = true;
  t.context = 3;
  const ToolMessage m = tool_message(t, 5, 1, kTwoCalls, detinfer::FinishReason::kStop);
  EXPECT_STREQ(m.finish_reason, "tool_calls");
  EXPECT_EQ(m.content, "Checking.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0]["function"]["name"], "a");
  EXPECT_EQ(m.tool_calls[0]["function"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(m.tool_calls[1]["id"], detinfer::chat::tool_call_id(5, t.context, 1, 1));
  t.parallel = false;
  EXPECT_EQ(tool_message(t, 5, 1, kTwoCalls, detinfer::FinishReason::kStop).tool_calls.size(), 1u);
}

TEST(ToolMessage, WithoutToolsOrCutForcedCallsTheTextStays) {
  ToolRequest none;
  const ToolMessage m = tool_message(none, 5, 0, kTwoCalls, detinfer::FinishReason::kStop);
  EXPECT_EQ(m.content, kTwoCalls);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_STREQ(m.finish_reason, "stop");
  ToolRequest forced;
  forced.parse = true;
  forced.forced = detinfer::chat::forced_call(detinfer::chat::ToolCallFormat::kHermes, "a");
  const ToolMessage cut = tool_message(forced, 5, 0, "{\"x\": 1", detinfer::FinishReason::kLength);
  EXPECT_EQ(cut.content, "{\"x\": 1");
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_STREQ(cut.finish_reason, "length");
  const ToolMessage done = tool_message(forced, 5, 0, "{\"x\": 1}", detinfer::FinishReason::kStop);
  ASSERT_EQ(done.tool_calls.size(), 1u);
  EXPECT_TRUE(done.content.is_null());
  EXPECT_EQ(done.tool_calls[0]["function"]["arguments"], "{\"x\":1}");
}

}  // namespace
}  // namespace detinfer_cli
