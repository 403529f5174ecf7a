// `detinfer serve`'s /v1/chat/completions over HTTP on the tiny model: the OpenAI shape,
// plain / streamed / n > 1 / seeded requests under 32 concurrent clients equal to the
// request alone (bitwise: content and digests), streamed deltas joining to the
// non-streamed message, chat-format logprobs, model defaults, and 400s naming the param.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/cli_test_support.h"
#include "cli/http_json.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::post;
using testing::ServeProcess;
using testing::sse_events;

const json kMessages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                    {{"role", "user"}, {"content", "Name a fox."}}});

// What a response says, reduced to what must be bitwise equal: per choice content and
// digest (streamed responses: the joined deltas and the final chunk's digest).
std::vector<std::pair<std::string, std::string>> outcome(int status, const std::string& body,
                                                         bool streamed) {
  EXPECT_EQ(status, 200) << body;
  std::vector<std::pair<std::string, std::string>> out;
  if (!streamed) {
    const json j = json::parse(body, nullptr, false);
    for (std::size_t i = 0; i < j["choices"].size(); ++i) {
      out.emplace_back(j["choices"][i]["message"]["content"].get<std::string>(),
                       j["detinfer"]["digests"][i].get<std::string>());
    }
    return out;
  }
  for (const json& e : sse_events(body)) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const std::size_t i = e["choices"][0]["index"].get<std::size_t>();
    if (out.size() <= i) out.resize(i + 1);
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) out[i].first += delta["content"].get<std::string>();
    if (e.contains("detinfer")) out[i].second = e["detinfer"]["digest"].get<std::string>();
  }
  return out;
}

class ChatServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(
        testing::make_tiny_model_with_cli(testing::cli_scratch_dir("chat-serve-model")));
    if (model_->empty()) return;
    server_ = new ServeProcess();
    if (!server_->start(*model_, {"--threads", "1"})) {
      delete server_;
      server_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) server_->signal_and_wait(SIGTERM, 20);
    delete server_;
    server_ = nullptr;
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(model_ != nullptr && !model_->empty());
    ASSERT_TRUE(server_ != nullptr) << "detinfer serve did not start";
  }
  static int port() { return server_->port(); }
  static std::string* model_;
  static ServeProcess* server_;
};
std::string* ChatServe::model_ = nullptr;
ServeProcess* ChatServe::server_ = nullptr;

TEST_F(ChatServe, OpenAiShapeAndTheModelsDefaults) {
  const auto [status, body] =
      post(port(), "/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 6}});
  ASSERT_EQ(status, 200) << body;
  const json j = json::parse(body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_TRUE(j["system_fingerprint"].is_string());
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["completion_tokens"].get<int>() <= 6, true);
  EXPECT_EQ(j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>(),
            j["usage"]["total_tokens"].get<int>());
  // The tiny model's generation_config.json says do_sample false: the omitted temperature
  // is greedy, i.e. the same as temperature 0 (not OpenAI's default 1).
  const auto [s0, greedy] = post(port(), "/v1/chat/completions",
                                 {{"messages", kMessages}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(s0, 200) << greedy;
  EXPECT_EQ(json::parse(greedy)["detinfer"]["digest"], j["detinfer"]["digest"]);
}

TEST_F(ChatServe, ConcurrentChatRequestsEqualTheRequestAlone) {
  const std::vector<std::pair<json, bool>> requests = {
      {{{"messages", kMessages}, {"max_tokens", 10}}, false},
      {{{"messages", kMessages}, {"max_tokens", 10}, {"stream", true}}, true},
      {{{"messages", kMessages},
        {"max_completion_tokens", 8},
        {"n", 2},
        {"temperature", 0.9},
        {"seed", 7}},
       false},
      {{{"messages", kMessages},
        {"max_tokens", 8},
        {"temperature", 0.8},
        {"top_p", 0.9},
        {"seed", 123},
        {"stream", true}},
       true}};
  std::vector<std::vector<std::pair<std::string, std::string>>> alone;
  for (const auto& [req, streamed] : requests) {
    const auto [st, body] = post(port(), "/v1/chat/completions", req);
    alone.push_back(outcome(st, body, streamed));
    ASSERT_FALSE(alone.back().empty());
  }
  constexpr int kClients = 32;
  std::vector<std::pair<int, std::string>> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      got[i] = post(port(), "/v1/chat/completions", requests[i % requests.size()].first);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    const std::size_t k = i % requests.size();
    EXPECT_EQ(outcome(got[i].first, got[i].second, requests[k].second), alone[k]) << i;
  }
  // Streamed deltas join to the non-streamed message (request 0 vs request 1).
  EXPECT_EQ(alone[1], alone[0]);
}

TEST_F(ChatServe, StreamShapeUsageAndLogprobs) {
  const auto [status, body] = post(port(), "/v1/chat/completions",
                                   {{"messages", kMessages},
                                    {"max_tokens", 5},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}},
                                    {"logprobs", true},
                                    {"top_logprobs", 2}});
  ASSERT_EQ(status, 200) << body;
  const std::vector<json> events = sse_events(body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events.back(), json("[DONE]"));
  const json& usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  const int completion = usage["usage"]["completion_tokens"].get<int>();
  int logprob_entries = 0;
  bool finished = false;
  for (const json& e : events) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (!c["finish_reason"].is_null()) finished = true;
    if (!c["logprobs"].is_null()) {
      for (const json& t : c["logprobs"]["content"]) {
        ++logprob_entries;
        EXPECT_TRUE(t["token"].is_string());
        EXPECT_TRUE(t["bytes"].is_array());
        EXPECT_EQ(t["top_logprobs"].size(), 2u);
      }
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(logprob_entries, completion);

  const auto [s2, whole] =
      post(port(), "/v1/chat/completions",
           {{"messages", kMessages}, {"max_tokens", 5}, {"logprobs", true}, {"top_logprobs", 2}});
  ASSERT_EQ(s2, 200) << whole;
  const json w = json::parse(whole);
  EXPECT_EQ(w["choices"][0]["logprobs"]["content"].size(),
            w["usage"]["completion_tokens"].get<std::size_t>());
}

TEST_F(ChatServe, BadRequestsAre400sNamingTheParam) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"max_tokens", 2}}, "messages"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", json::array({{{"content", "x"}}})}}, "messages[0].role"},
      {{{"messages", json::array({{{"role", "user"}, {"content", 3}}})}}, "messages[0].content"},
      {{{"messages", kMessages}, {"tools", "x"}}, "tools"},
      {{{"messages", kMessages}, {"tool_choice", "required"}}, "tool_choice"},
      {{{"messages", kMessages}, {"top_logprobs", 2}}, "top_logprobs"},
      {{{"messages", kMessages}, {"max_completion_tokens", 0}}, "max_completion_tokens"},
      {{{"messages", kMessages}, {"temperature", "hot"}}, "temperature"},
      {{{"messages", kMessages}, {"prompt", "x"}}, "prompt"},
      {{{"messages", kMessages}, {"chat_template_kwargs", 1}}, "chat_template_kwargs"}};
  for (const auto& [req, param] : cases) {
    const auto [status, body] = post(port(), "/v1/chat/completions", req);
    EXPECT_EQ(status, 400) << req << " -> " << body;
    const json j = json::parse(body, nullptr, false);
    EXPECT_EQ(j["error"]["param"], param) << req << " -> " << body;
  }
  const auto [status, body] =
      post(port(), "/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 2}});
  EXPECT_EQ(status, 200) << body;  // still serving
}

// response_format on both endpoints: the output follows the schema and ends with it; an
// unsupported keyword or a malformed format is a 400 naming response_format.
TEST_F(ChatServe, ResponseFormatConstrainsTheOutput) {
  const json schema = {
      {"type", "object"},
      {"properties", {{"ok", {{"type", "boolean"}}}, {"n", {{"type", "integer"}}}}},
      {"required", {"ok", "n"}},
      {"additionalProperties", false}};
  const json format = {{"type", "json_schema"},
                       {"json_schema", {{"name", "answer"}, {"schema", schema}, {"strict", true}}}};
  const auto [s1, b1] =
      post(port(), "/v1/chat/completions",
           {{"messages", kMessages}, {"max_tokens", 60}, {"response_format", format}});
  ASSERT_EQ(s1, 200) << b1;
  const json r1 = json::parse(b1);
  EXPECT_EQ(r1["choices"][0]["finish_reason"], "stop") << b1;
  const json v = json::parse(r1["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_TRUE(v["ok"].is_boolean() && v["n"].is_number_integer()) << v;
  const auto [s2, b2] = post(port(), "/v1/completions",
                             {{"prompt", "x"},
                              {"max_tokens", 80},
                              {"seed", 3},
                              {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(s2, 200) << b2;
  EXPECT_EQ(json::parse(b2)["choices"][0]["text"].get<std::string>().substr(0, 1), "{");
  json bad_schema = format;
  bad_schema["json_schema"]["schema"]["properties"]["n"]["multipleOf"] = 2;
  for (const json& f : {bad_schema, json{{"type", "xml"}}, json{{"type", "json_schema"}}}) {
    const auto [status, body] =
        post(port(), "/v1/chat/completions", {{"messages", kMessages}, {"response_format", f}});
    EXPECT_EQ(status, 400) << f << " -> " << body;
    EXPECT_EQ(json::parse(body, nullptr, false)["error"]["param"], "response_format") << body;
    const auto [cs, cb] =
        post(port(), "/v1/completions", {{"prompt", "x"}, {"response_format", f}});
    EXPECT_EQ(cs, 400) << f << " -> " << cb;
    EXPECT_EQ(json::parse(cb, nullptr, false)["error"]["param"], "response_format") << cb;
  }
  const auto [s3, b3] = post(port(), "/v1/chat/completions", {{"messages", kMessages}});
  EXPECT_EQ(s3, 200) << b3;  // still serving
}

// The schema's properties are generated in the order the client wrote them (not sorted).
TEST_F(ChatServe, ResponseFormatKeepsTheSchemasPropertyOrder) {
  const std::string schema =
      R"({"type": "object", "properties": {"zeta": {"const": 1}, "alpha": {"const": 2}},)"
      R"( "required": ["zeta", "alpha"], "additionalProperties": false})";
  const std::string format =
      R"({"type": "json_schema", "json_schema": {"name": "o", "schema": )" + schema + "}}";
  for (const std::string& body :
       {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 40, )"
        R"("response_format": )" +
            format + "}",
        R"({"prompt": "x", "max_tokens": 40, "response_format": )" + format + "}"}) {
    const bool chat = body.find("messages") != std::string::npos;
    httplib::Client c("127.0.0.1", port());
    const httplib::Result r =
        c.Post(chat ? "/v1/chat/completions" : "/v1/completions", body, "application/json");
    ASSERT_TRUE(r) << body;
    ASSERT_EQ(r->status, 200) << r->body;
    const json choice = json::parse(r->body)["choices"][0];
    const std::string text = chat ? choice["message"]["content"] : choice["text"];
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(text);
    ASSERT_EQ(v.size(), 2u) << text;
    EXPECT_EQ(v.begin().key(), "zeta") << text;
  }
}

TEST_F(ChatServe, ConsistencyUrlChatAuditsTheEndpoint) {
  const auto r = testing::run_shell(
      testing::cli_path() + " consistency --url http://127.0.0.1:" + std::to_string(port()) +
      " --chat --runs 8 --max-new-tokens 6 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["distinct_outputs"], 1) << r.out;
  EXPECT_EQ(j["runs"], 8);
}

}  // namespace
}  // namespace detinfer
