// The official `openai` npm client (vendored: tests/cli/fixtures/openai-node) against a real
// `detinfer serve` (docs/tools.md): plain chat, streamed chat, named and required tool
// calls, required tool calls streamed and accumulated by the client's own stream helper, a
// tool result round-tripping through the Qwen 2.5 template, a 400 as the client's typed
// error, and an API key sent by the client. Skipped only when `node` is not installed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_test_support.h"
#include "cli/tool_call_checks.h"

namespace detinfer {
namespace {

using nlohmann::json;

const char* const kKey = "sk-detinfer-node-client-test";

// A call valid against client.js's schemas (days in 1..7), of the function wanted.
void expect_valid_call(const json& call, const std::string& want_name = "") {
  testing::expect_valid_tool_call(call, 1, 7);
  if (!want_name.empty()) {
    EXPECT_EQ(call["function"]["name"], want_name);
  }
}

// The calls as {id, name, arguments} (what a client keeps of them).
json calls_of(const json& completion) {
  json out = json::array();
  for (const json& c : completion["choices"][0]["message"]["tool_calls"]) {
    out.push_back({c["id"], c["function"]["name"], c["function"]["arguments"]});
  }
  return out;
}

TEST(OpenAiNodeClient, ToolCallsPlainChatAndStreamingThroughTheOfficialClient) {
  if (testing::run_shell("command -v node").exit_code != 0) {
    GTEST_SKIP() << "node is not installed (scripts/install-deps.sh installs Debian's nodejs)";
  }
  const std::string fixtures = std::string(DETINFER_SOURCE_DIR) + "/tests/cli/fixtures/openai-node";
  const std::string dir = testing::cli_scratch_dir("openai-node");
  const auto untar = testing::run_shell("rm -rf '" + dir + "/package' && tar xzf '" + fixtures +
                                        "/openai-5.23.2-cjs.tgz' -C '" + dir + "'");
  ASSERT_EQ(untar.exit_code, 0) << untar.err;
  const std::string model = dir + "/model";
  const auto made = testing::run_shell(
      testing::cli_path() + " make-tiny-model --arch qwen2 --seed 1 --max-positions 8192 " +
      "--chat-template '" + DETINFER_SOURCE_DIR + "/tests/jinja/fixtures/templates/qwen2_5.jinja'" +
      " --out '" + model + "'");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  testing::ServeProcess server;
  ASSERT_TRUE(server.start(model, {"--threads", "1", "--api-key", kKey})) << server.log();
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/v1";
  const auto r = testing::run_shell("node '" + fixtures + "/client.js' '" + dir + "/package' '" +
                                    base + "' '" + kKey + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err << "\nserver log:\n" << server.log();
  const json out = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << r.out;

  // Plain chat, whole and streamed: the same text.
  const json& plain = out["plain"]["choices"][0];
  ASSERT_TRUE(plain["message"]["content"].is_string()) << out["plain"];
  EXPECT_FALSE(plain["message"]["content"].get<std::string>().empty());
  EXPECT_EQ(out["plain_stream"]["text"], plain["message"]["content"]);
  EXPECT_EQ(out["plain_stream"]["finish_reason"], plain["finish_reason"]);

  // Forced calls: valid arguments, finish_reason tool_calls.
  ASSERT_EQ(out["named"]["choices"][0]["message"]["tool_calls"].size(), 1u) << out["named"];
  expect_valid_call(out["named"]["choices"][0]["message"]["tool_calls"][0], "get_weather");
  EXPECT_EQ(out["named"]["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(out["required"]["choices"][0]["message"]["tool_calls"].size(), 1u) << out["required"];
  expect_valid_call(out["required"]["choices"][0]["message"]["tool_calls"][0]);
  // The client's stream helper accumulates the deltas into the whole answer.
  EXPECT_EQ(calls_of(out["required_stream"]), calls_of(out["required"]));
  EXPECT_EQ(out["required_stream"]["choices"][0]["finish_reason"], "tool_calls");

  // The round trip: a get_time call with a new id.
  ASSERT_EQ(out["round_trip"]["choices"][0]["message"]["tool_calls"].size(), 1u)
      << out["round_trip"];
  const json& next = out["round_trip"]["choices"][0]["message"]["tool_calls"][0];
  expect_valid_call(next, "get_time");
  EXPECT_NE(next["id"], out["named"]["choices"][0]["message"]["tool_calls"][0]["id"]);

  EXPECT_EQ(out["error"]["status"], 400) << out["error"];
  EXPECT_EQ(out["error"]["param"], "tool_choice") << out["error"];
  EXPECT_EQ(out["error"]["name"], "BadRequestError") << out["error"];

  // What the client got is what the same request sent raw gets; without the key: 401.
  httplib::Client raw("127.0.0.1", server.port());
  raw.set_read_timeout(120, 0);
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  // The client's key order (the template renders the tools in it).
  const std::string named_request = nlohmann::ordered_json::parse(r.out)["named_request"].dump();
  const auto same = raw.Post("/v1/chat/completions", auth, named_request, "application/json");
  ASSERT_TRUE(same);
  ASSERT_EQ(same->status, 200) << same->body;
  EXPECT_EQ(calls_of(json::parse(same->body)), calls_of(out["named"]));
  const auto unauthorized = raw.Get("/v1/models");
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
}

}  // namespace
}  // namespace detinfer
