// `detinfer serve`: completion and chat responses carry detinfer.transcript, and POST
// /v1/verify checks it (200 verified / 200 diverged at the tampered step), verifies many
// together, and answers hostile or foreign transcripts with a 4xx JSON error.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::ServeProcess;

struct VerifyServe : ::testing::Test {
  static void SetUpTestSuite() {
    model_ = new std::string(testing::make_tiny_model_with_cli(testing::cli_scratch_dir("m")));
    server_ = new ServeProcess();
    if (model_->empty() || !server_->start(*model_, {"--threads", "1"})) {
      ok_ = false;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  void SetUp() override { ASSERT_TRUE(ok_) << server_->log(); }

  static std::pair<int, json> post(const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(120, 0);
    const httplib::Result r = c.Post(path, body, "application/json");
    if (!r) return {-1, json(httplib::to_string(r.error()))};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  static std::string* model_;
  static ServeProcess* server_;
  static bool ok_;
};
std::string* VerifyServe::model_ = nullptr;
ServeProcess* VerifyServe::server_ = nullptr;
bool VerifyServe::ok_ = true;

TEST_F(VerifyServe, ResponsesCarryATranscriptThatVerifies) {
  const auto [s, r] = post("/v1/completions", json{{"prompt", "Verify me"},
                                                   {"max_tokens", 10},
                                                   {"temperature", 0.9},
                                                   {"seed", 4},
                                                   {"ignore_eos", true}}
                                                  .dump());
  ASSERT_EQ(s, 200) << r;
  const json t = r["detinfer"]["transcript"];
  ASSERT_EQ(t["format"], "detinfer.transcript/1") << r;
  const auto [vs, v] = post("/v1/verify", json{{"transcript", t}}.dump());
  ASSERT_EQ(vs, 200) << v;
  EXPECT_EQ(v["verified"], true) << v;
  EXPECT_EQ(v["steps_checked"], 10);

  json bad = t;
  bad["samples"][0]["tokens"][4] = (bad["samples"][0]["tokens"][4].get<int>() + 1) % 256;
  const auto [ds, d] = post("/v1/verify", json{{"transcripts", {t, bad}}}.dump());
  ASSERT_EQ(ds, 200) << d;
  EXPECT_EQ(d["results"][0]["verified"], true) << d;
  EXPECT_EQ(d["results"][1]["verified"], false) << d;
  EXPECT_EQ(d["results"][1]["divergence"]["step"], 4) << d;

  const auto [cs, c] =
      post("/v1/chat/completions",
           json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 6}}.dump());
  ASSERT_EQ(cs, 200) << c;
  const auto [cvs, cv] =
      post("/v1/verify", json{{"transcript", c["detinfer"]["transcript"]}}.dump());
  ASSERT_EQ(cvs, 200) << cv;
  EXPECT_EQ(cv["verified"], true) << cv;
}

// Chat answers carry the messages form (format /2): the conversation, its options and, for
// a forced tool call, the opening appended to the prompt. It verifies, also without its
// prompt ids; an edited message is a "prompt" divergence.
TEST_F(VerifyServe, ChatTranscriptsCarryTheConversation) {
  const json tool = {{"type", "function"},
                     {"function",
                      {{"name", "get_time"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties", {{"tz", {{"enum", {"UTC", "CET"}}}}}},
                         {"required", {"tz"}}}}}}};
  const json body = {{"messages", {{{"role", "user"}, {"content", "time?"}}}},
                     {"tools", {tool}},
                     {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
                     {"max_tokens", 40},
                     {"temperature", 0.8},
                     {"seed", 3}};
  const auto [cs, c] = post("/v1/chat/completions", body.dump());
  ASSERT_EQ(cs, 200) << c;
  ASSERT_EQ(c["choices"][0]["finish_reason"], "tool_calls") << c;
  const json t = c["detinfer"]["transcript"];
  ASSERT_EQ(t["format"], "detinfer.transcript/2") << t;
  EXPECT_EQ(json::parse(t["chat"]["messages"].get<std::string>())[0]["content"], "time?");
  EXPECT_EQ(t["chat"]["prompt_suffix"], "<tool_call>\n{\"name\": \"get_time\", \"arguments\": ");
  EXPECT_TRUE(t["chat"]["now"].is_number_integer());
  json bare = t;
  bare.erase("prompt_tokens");
  json edited = t;
  edited["chat"]["messages"] = json::array({{{"role", "user"}, {"content", "time!"}}}).dump();
  const auto [vs, v] = post("/v1/verify", json{{"transcripts", {t, bare, edited}}}.dump());
  ASSERT_EQ(vs, 200) << v;
  EXPECT_EQ(v["results"][0]["verified"], true) << v;
  EXPECT_EQ(v["results"][1]["verified"], true) << v;
  EXPECT_EQ(v["results"][2]["verified"], false) << v;
  EXPECT_EQ(v["results"][2]["divergence"]["reason"], "prompt") << v;
  json broken = t;
  broken["chat"]["messages"] = "[{\"role\": 1}]";
  const auto [bs, b] = post("/v1/verify", json{{"transcript", broken}}.dump());
  EXPECT_EQ(bs, 400) << b;
  EXPECT_EQ(b["error"]["param"], "chat.messages[0].role") << b;
}

TEST_F(VerifyServe, HostileOrForeignTranscriptsAre4xx) {
  const auto [s, r] = post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 3}}.dump());
  ASSERT_EQ(s, 200) << r;
  const json t = r["detinfer"]["transcript"];
  auto expect_4xx = [&](const std::string& body, const std::string& what) {
    const auto [code, e] = post("/v1/verify", body);
    EXPECT_TRUE(code >= 400 && code < 500) << what << ": " << code << " " << e;
    EXPECT_TRUE(e.contains("error")) << what << ": " << e;
  };
  expect_4xx("{", "truncated JSON");
  expect_4xx(std::string(5000, '[') + std::string(5000, ']'), "deep JSON");
  expect_4xx("{\"transcript\": \"\xff\"}", "invalid UTF-8");
  expect_4xx(json{{"transcript", t}, {"extra", 1}}.dump(), "unknown field");
  expect_4xx(json{{"transcripts", json::array()}}.dump(), "no transcripts");
  json x = t;
  x["model"]["fingerprint"] = std::string(32, '0');
  expect_4xx(json{{"transcript", x}}.dump(), "another model");
  x = t;
  x["samples"][0]["tokens"][0] = 1 << 30;
  expect_4xx(json{{"transcript", x}}.dump(), "id out of vocabulary");
  x = t;
  x["samples"][0]["step_digests"] = json::array();
  expect_4xx(json{{"transcript", x}}.dump(), "mismatched lengths");
  x = t;
  x["prompt_tokens"] = std::vector<int>(1100000, 1);
  expect_4xx(json{{"transcript", x}}.dump(), "huge token count");
  // The server still serves.
  const auto [vs, v] = post("/v1/verify", json{{"transcript", t}}.dump());
  EXPECT_EQ(vs, 200) << v;
  EXPECT_EQ(v["verified"], true) << v;
}

}  // namespace
}  // namespace detinfer
