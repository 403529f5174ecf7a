// `detinfer serve` (and the other tools) with the production options of issue 17, as a
// child process over HTTP: --print-config reflects the file and the flags, the seed
// policy (400 naming seed, drawn seeds below 2^53, seeds counted and logged), 421 on an
// unexpected fingerprint, --expect-system-fingerprint, the two-level consistency policy
// with injected mismatches (/health 503 with the reason; drain and exit code 3), and
// metrics that pass `promtool check metrics` and move.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::cli_path;
using testing::run_shell;
using testing::ServeProcess;

const std::string& model() {
  static const std::string dir =
      testing::make_tiny_model_with_cli(testing::cli_scratch_dir("serving-model"));
  return dir;
}

httplib::Client client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(120, 0);
  return c;
}

std::pair<int, json> complete(int port, const json& body, const httplib::Headers& h = {}) {
  httplib::Client c = client(port);
  const httplib::Result r = c.Post("/v1/completions", h, body.dump(), "application/json");
  if (!r) return {-1, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

std::string get(int port, const std::string& path, int* status = nullptr) {
  httplib::Client c = client(port);
  const httplib::Result r = c.Get(path);
  if (status) *status = r ? r->status : -1;
  return r ? r->body : std::string();
}

// The value of one sample line `series value` in Prometheus text; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// A prompt longer than one KV block, so that repeats hit the prefix cache.
const char* kLongPrompt =
    "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat";

TEST(ServingConfig, PrintConfigShowsTheFileOverriddenByFlagsForEveryTool) {
  const std::string dir = testing::cli_scratch_dir("serving-config");
  std::ofstream(dir + "/c.json") << R"({"kv_block_size": 8, "max_queue": 7,
      "cache": {"prefix": {"memory": {"ttl_seconds": 60}}}, "threads": 1})";
  for (const std::string tool : {"serve", "generate", "consistency", "bench"}) {
    SCOPED_TRACE(tool);
    const testing::ProcessResult r =
        run_shell(cli_path() + " " + tool + " --model '" + model() + "' --config '" + dir +
                  "/c.json' --kv-block-size 32 --prefix-cache-redis-ttl 99 --print-config");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["kv_block_size"], 32);  // the flag beats the file
    EXPECT_EQ(j["max_queue"], 7);       // from the file
    EXPECT_EQ(j["cache"]["prefix"]["memory"]["ttl_seconds"], 60.0);
    EXPECT_EQ(j["cache"]["prefix"]["redis"]["ttl_seconds"], 99);
    EXPECT_GT(j["kv_budget_bytes"].get<std::int64_t>(), 0);  // auto, resolved
    EXPECT_EQ(j.contains("seed"), tool == "serve");
  }
  const testing::ProcessResult bad =
      run_shell("timeout 60 " + cli_path() + " serve --model '" + model() + "' --config '" + dir +
                "/missing.json' --print-config");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("missing.json"), std::string::npos);
}

TEST(ServingPolicy, SeedPolicyFingerprintHeaderAndMetrics) {
  ServeProcess s;
  ASSERT_TRUE(s.start(model(), {"--threads", "1", "--require-seed", "--log-level", "info",
                                "--consistency-monitor", "--consistency-sample-rate", "1"}))
      << s.log();
  auto [st, body] = complete(s.port(), {{"prompt", "hi"}, {"max_tokens", 4}});
  EXPECT_EQ(st, 400);  // sampled at the default temperature 1, no seed
  EXPECT_EQ(body["error"]["param"], "seed");
  std::tie(st, body) = complete(s.port(), {{"prompt", "hi"}, {"max_tokens", 4}, {"seed", 7}});
  ASSERT_EQ(st, 200) << body;
  const std::string fp = body["system_fingerprint"];
  const std::string id = body["id"];
  // The fleet check: the same fingerprint passes, another one is 421.
  std::tie(st, body) = complete(s.port(), {{"prompt", "hi"}, {"max_tokens", 2}, {"seed", 7}},
                                {{"X-Detinfer-Expect-Fingerprint", fp}});
  EXPECT_EQ(st, 200);
  std::tie(st, body) = complete(s.port(), {{"prompt", "hi"}, {"max_tokens", 2}, {"seed", 7}},
                                {{"X-Detinfer-Expect-Fingerprint", "fp_0000000000000000"}});
  EXPECT_EQ(st, 421);
  EXPECT_EQ(body["error"]["code"], "fingerprint_mismatch");
  for (int i = 0; i < 3; ++i) {
    std::tie(st, body) =
        complete(s.port(), {{"prompt", kLongPrompt}, {"max_tokens", 4}, {"temperature", 0}});
    ASSERT_EQ(st, 200);
  }
  // The seed of every request is logged with its id and the environment hash.
  EXPECT_NE(s.log().find("request " + id + " seed 7 (given) environment "), std::string::npos)
      << s.log();
  const std::string dir = testing::cli_scratch_dir("serving-metrics");
  const std::string text = get(s.port(), "/metrics");
  std::ofstream(dir + "/m.txt") << text;
  const testing::ProcessResult lint = run_shell("promtool check metrics < '" + dir + "/m.txt'");
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(sample(text, "detinfer_seeds_total{source=\"given\"}"), 2);
  EXPECT_EQ(sample(text, "detinfer_seeds_total{source=\"default\"}"), 3);
  EXPECT_GE(sample(text, "detinfer_cache_tier_hits_total{cache=\"prefix\",tier=\"memory\"}"), 2);
  EXPECT_GT(sample(text, "detinfer_cache_hit_ratio{cache=\"prefix\",tier=\"memory\"}"), 0);
  EXPECT_GT(sample(text, "detinfer_prefix_cached_tokens_total"), 0);
  EXPECT_GT(sample(text, "detinfer_time_to_first_token_seconds_count"), 0);
  EXPECT_GT(sample(text, "detinfer_inter_token_latency_seconds_count"), 0);
  EXPECT_GT(sample(text, "detinfer_batch_size_count"), 0);
  EXPECT_GT(sample(text, "detinfer_kv_blocks_capacity"), 0);
  EXPECT_GE(sample(text, "detinfer_queue_depth"), 0);
  // KV admission (docs/session.md): served even while nothing was preempted.
  EXPECT_EQ(sample(text, "detinfer_preemptions_total"), 0);
  EXPECT_EQ(sample(text, "detinfer_resumptions_total"), 0);
  EXPECT_GT(sample(text, "process_resident_memory_bytes"), 1e6);
  EXPECT_GT(sample(text, "process_open_fds"), 2);
  EXPECT_NE(text.find("detinfer_build_info{version=\""), std::string::npos);
  EXPECT_EQ(sample(text, "detinfer_consistency_failed"), 0);
}

TEST(ServingPolicy, DrawnSeedsStayBelowTwoToThe53) {
  ServeProcess s;
  ASSERT_TRUE(s.start(model(), {"--threads", "1"})) << s.log();
  for (int i = 0; i < 20; ++i) {
    auto [st, body] = complete(s.port(), {{"prompt", "hi"}, {"max_tokens", 1}});
    ASSERT_EQ(st, 200);
    EXPECT_LT(body["detinfer"]["seed"].get<std::uint64_t>(), std::uint64_t{1} << 53);
  }
  EXPECT_EQ(sample(get(s.port(), "/metrics"), "detinfer_seeds_total{source=\"drawn\"}"), 20);
}

TEST(ServingPolicy, ExpectSystemFingerprintRefusesAnotherFleet) {
  ServeProcess a;
  ASSERT_TRUE(a.start(model(), {"--threads", "1"})) << a.log();
  const std::string fp =
      json::parse(get(a.port(), "/v1/models"))["data"][0]["detinfer"]["system_fingerprint"];
  ServeProcess same;
  EXPECT_TRUE(same.start(model(), {"--threads", "1", "--expect-system-fingerprint", fp}))
      << same.log();
  // A replica in another numerics mode computes other numbers: it must not join.
  const testing::ProcessResult fast =
      run_shell("timeout 60 " + cli_path() + " serve --model '" + model() +
                "' --port 0 --mode fast --threads 1 --expect-system-fingerprint " + fp);
  EXPECT_EQ(fast.exit_code, 4) << fast.err;
  EXPECT_NE(fast.err.find(fp), std::string::npos);
}

TEST(ServingPolicy, BelowFailHealthIs503WithTheReason) {
  ServeProcess s;
  ASSERT_TRUE(s.start(model(), {"--threads", "1", "--inject-consistency-mismatches", "3"}))
      << s.log();
  int status = 0;
  const json h = json::parse(get(s.port(), "/health", &status));
  EXPECT_EQ(status, 503);
  EXPECT_EQ(h["status"], "inconsistent");
  EXPECT_NE(h["reason"].get<std::string>().find("below fail_below 0.99"), std::string::npos);
  const std::string text = get(s.port(), "/metrics");
  EXPECT_EQ(sample(text, "detinfer_consistency_failed"), 1);
  EXPECT_EQ(sample(text, "detinfer_consistency_alert"), 1);
  // Still serving (no --exit-on-inconsistency): the supervisor decides.
  EXPECT_EQ(complete(s.port(), {{"prompt", "hi"}, {"max_tokens", 1}, {"seed", 1}}).first, 200);
}

TEST(ServingPolicy, ExitOnInconsistencyDrainsInFlightAndExitsWithThree) {
  ServeProcess s;
  ASSERT_TRUE(s.start(model(), {"--threads", "1", "--inject-consistency-mismatches", "3",
                                "--exit-on-inconsistency"}))
      << s.log();
  std::atomic<bool> first_chunk{false};
  std::string stream;
  std::thread reader([&] {
    httplib::Client c = client(s.port());
    json req = {
        {"prompt", "hi"}, {"max_tokens", 200}, {"seed", 3}, {"stream", true}, {"ignore_eos", true}};
    httplib::Request r;
    r.method = "POST";
    r.path = "/v1/completions";
    r.body = req.dump();
    r.set_header("Content-Type", "application/json");
    r.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      stream.append(data, n);
      first_chunk = true;
      return true;
    };
    c.send(r);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!first_chunk && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();  // wait until the request is in flight
  }
  EXPECT_TRUE(first_chunk.load()) << s.log();
  int status = 0;
  get(s.port(), "/health", &status);  // evaluates the policy: fails, starts the drain
  const int code = s.signal_and_wait(0, 120);
  reader.join();
  EXPECT_EQ(code, 3) << s.log();
  EXPECT_NE(stream.find("\"finish_reason\":\"length\""), std::string::npos) << stream;
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos);
}

}  // namespace
}  // namespace detinfer
