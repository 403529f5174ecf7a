// `detinfer serve`'s one request pipeline (docs/server.md, "One request pipeline"), as a
// child process over HTTP: /v1/chat/completions goes through the same admission and
// completion hooks as /v1/completions (--require-seed, the X-Detinfer-Expect-Fingerprint
// 421, the seed counters and the seed log), and the same invalid field gets the same error
// body on both routes, naming the parameter as the client spelled it.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::ServeProcess;

const std::string& funnel_model() {
  static const std::string dir =
      testing::make_tiny_model_with_cli(testing::cli_scratch_dir("funnel-model"));
  return dir;
}

// {status, parsed body}; status -1 when no response came back.
std::pair<int, json> post(int port, const std::string& path, const json& body,
                          const httplib::Headers& headers = {}) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(120, 0);
  const httplib::Result r = c.Post(path, headers, body.dump(), "application/json");
  if (!r) return {-1, json()};
  // A streamed answer is not one JSON document: kept as text.
  json j = json::parse(r->body, nullptr, false);
  return {r->status, j.is_discarded() ? json(r->body) : j};
}

std::pair<int, json> chat(int port, json body, const httplib::Headers& headers = {}) {
  body["messages"] = json::array({{{"role", "user"}, {"content", "Name a fox."}}});
  return post(port, "/v1/chat/completions", body, headers);
}

std::pair<int, json> complete(int port, json body, const httplib::Headers& headers = {}) {
  body["prompt"] = "Name a fox.";
  return post(port, "/v1/completions", body, headers);
}

std::string metrics(int port) {
  httplib::Client c("127.0.0.1", port);
  const httplib::Result r = c.Get("/metrics");
  return r ? r->body : std::string();
}

// The value of one sample line `series value` in Prometheus text; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// One server for every test here: --require-seed, seed log lines at info level. A
// ServeProcess SIGKILLs a server still running when it is destroyed (at exit).
ServeProcess* server() {
  static ServeProcess s;
  static const bool started =
      !funnel_model().empty() &&
      s.start(funnel_model(), {"--threads", "1", "--require-seed", "--log-level", "info"});
  return started ? &s : nullptr;
}

int port() { return server()->port(); }

TEST(ServeFunnel, ChatWithoutSeedUnderRequireSeedIs400NamingSeed) {
  ASSERT_NE(server(), nullptr) << "detinfer serve did not start";
  auto [st, body] = chat(port(), {{"max_tokens", 3}, {"temperature", 0.8}});
  EXPECT_EQ(st, 400) << body;
  EXPECT_EQ(body["error"]["param"], "seed") << body;
  EXPECT_EQ(body["error"]["code"], "seed_required") << body;
  std::tie(st, body) = chat(port(), {{"max_tokens", 3}, {"temperature", 0.8}, {"stream", true}});
  EXPECT_EQ(st, 400) << body;
  ASSERT_TRUE(body.is_object()) << body;  // not a stream of events
  EXPECT_EQ(body["error"]["param"], "seed") << body;
  // Seeded, or greedy (the tiny model's generation_config.json: do_sample false), passes.
  EXPECT_EQ(chat(port(), {{"max_tokens", 3}, {"temperature", 0.8}, {"seed", 5}}).first, 200);
  EXPECT_EQ(chat(port(), {{"max_tokens", 3}}).first, 200);
}

TEST(ServeFunnel, ChatWithAnotherFleetsFingerprintIs421) {
  ASSERT_NE(server(), nullptr) << "detinfer serve did not start";
  auto [st, body] = chat(port(), {{"max_tokens", 2}});
  ASSERT_EQ(st, 200) << body;
  const std::string fp = body["system_fingerprint"];
  std::tie(st, body) =
      chat(port(), {{"max_tokens", 2}}, {{"X-Detinfer-Expect-Fingerprint", "fp_0000000000000000"}});
  EXPECT_EQ(st, 421) << body;
  EXPECT_EQ(body["error"]["code"], "fingerprint_mismatch");
  EXPECT_EQ(body["error"]["param"], "X-Detinfer-Expect-Fingerprint");
  std::tie(st, body) = chat(port(), {{"max_tokens", 2}}, {{"X-Detinfer-Expect-Fingerprint", fp}});
  EXPECT_EQ(st, 200) << body;
}

TEST(ServeFunnel, ChatRequestsMoveTheSeedCountersAndWriteTheSeedLog) {
  ASSERT_NE(server(), nullptr) << "detinfer serve did not start";
  const std::string before = metrics(port());
  const double given = sample(before, "detinfer_seeds_total{source=\"given\"}");
  const double def = sample(before, "detinfer_seeds_total{source=\"default\"}");
  ASSERT_GE(given, 0) << before;
  auto [st, body] = chat(port(), {{"max_tokens", 3}, {"temperature", 0.7}, {"seed", 7}});
  ASSERT_EQ(st, 200) << body;
  const std::string id = body["id"];
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  std::tie(st, body) = chat(port(), {{"max_tokens", 3}, {"seed", 11}, {"stream", true}});
  ASSERT_EQ(st, 200) << body;
  std::tie(st, body) = chat(port(), {{"max_tokens", 3}});  // greedy, no seed
  ASSERT_EQ(st, 200) << body;
  const std::string after = metrics(port());
  EXPECT_EQ(sample(after, "detinfer_seeds_total{source=\"given\"}"), given + 2) << after;
  EXPECT_EQ(sample(after, "detinfer_seeds_total{source=\"default\"}"), def + 1) << after;
  EXPECT_NE(server()->log().find("request " + id + " seed 7 (given) environment "),
            std::string::npos)
      << server()->log();
  EXPECT_NE(server()->log().find(" seed 11 (given) environment "), std::string::npos)
      << server()->log();
}

TEST(ServeFunnel, TheSameInvalidFieldGetsTheSameErrorBodyOnBothRoutes) {
  ASSERT_NE(server(), nullptr) << "detinfer serve did not start";
  const std::vector<json> cases = {
      {{"temperature", "hot"}, {"seed", 1}},
      {{"temperature", 3}, {"seed", 1}},
      {{"top_p", 0}, {"seed", 1}},
      {{"top_k", -1}, {"seed", 1}},
      {{"n", 0}, {"seed", 1}},
      {{"max_tokens", 0}, {"seed", 1}},
      {{"max_tokens", 1000000}, {"seed", 1}},
      {{"presence_penalty", 3}, {"seed", 1}},
      {{"stop", 5}, {"seed", 1}},
      {{"seed", "x"}},
      {{"frobnicate", 1}, {"seed", 1}},
      {{"model", "other"}, {"seed", 1}},
      {{"logit_bias", json::object()}, {"seed", 1}},
      {{"stream_options", {{"include_usage", true}}}, {"seed", 1}},
      {{"num_beams", 2}, {"stream", true}, {"seed", 1}},
      {{"temperature", 0.7}},  // sampled without a seed under --require-seed
  };
  for (const json& c : cases) {
    json body = c;
    body["max_tokens"] = c.contains("max_tokens") ? c["max_tokens"] : json(2);
    const auto [cs, cbody] = complete(port(), body);
    const auto [hs, hbody] = chat(port(), body);
    EXPECT_GE(cs, 400) << c << " -> " << cbody;
    EXPECT_EQ(hs, cs) << c << " -> " << hbody;
    EXPECT_EQ(hbody, cbody) << c;
  }
  const httplib::Headers other = {{"X-Detinfer-Expect-Fingerprint", "fp_1"}};
  const auto [cs, cbody] = complete(port(), {{"max_tokens", 2}, {"seed", 1}}, other);
  const auto [hs, hbody] = chat(port(), {{"max_tokens", 2}, {"seed", 1}}, other);
  EXPECT_EQ(cs, 421);
  EXPECT_EQ(hs, 421);
  EXPECT_EQ(hbody, cbody);
}

// max_completion_tokens is chat's own spelling: its errors, found while parsing or by the
// engine (prompt + max_completion_tokens over the context), name it, not max_tokens.
TEST(ServeFunnel, ChatErrorsNameMaxCompletionTokensWhenSent) {
  ASSERT_NE(server(), nullptr) << "detinfer serve did not start";
  httplib::Client c("127.0.0.1", port());
  const json models = json::parse(c.Get("/v1/models")->body);
  const std::int64_t context = models["data"][0]["detinfer"]["context_length"];
  auto [st, body] = chat(port(), {{"max_completion_tokens", context + 1}});
  EXPECT_EQ(st, 400) << body;
  EXPECT_EQ(body["error"]["param"], "max_completion_tokens") << body;
  EXPECT_EQ(body["error"]["message"].get<std::string>().rfind("'max_completion_tokens'", 0), 0u)
      << body;
  std::tie(st, body) = chat(port(), {{"max_completion_tokens", context - 1}});
  EXPECT_EQ(st, 400) << body;
  EXPECT_EQ(body["error"]["param"], "max_completion_tokens") << body;
  std::tie(st, body) = chat(port(), {{"max_tokens", context - 1}});
  EXPECT_EQ(st, 400) << body;
  EXPECT_EQ(body["error"]["param"], "max_tokens") << body;
}

}  // namespace
}  // namespace detinfer
