// `detinfer serve --api-key/--api-key-file` over HTTP: every route answers 401 without a
// key and with a wrong one, works with a right one; /health and /metrics are open unless
// protected by flag; the keys never reach the log or /metrics.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::ServeProcess;

const char* const kFlagKey = "sk-flag-4f9a8b7c6d5e";
const char* const kFileKey = "sk-file-0a1b2c3d4e5f";

const std::string& tiny_model() {
  static const std::string dir =
      testing::make_tiny_model_with_cli(testing::cli_scratch_dir("auth-model"));
  return dir;
}

struct Route {
  const char* method;
  const char* path;
  json body;
};

// Every route of the server, each with a body it accepts.
std::vector<Route> routes() {
  return {{"POST", "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}}},
          {"POST",
           "/v1/chat/completions",
           {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 2}}},
          {"GET", "/v1/models", nullptr},
          {"GET", "/v1/models/model", nullptr},
          {"GET", "/health", nullptr},
          {"GET", "/metrics", nullptr}};
}

httplib::Result send(int port, const Route& r, const std::string& key) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  if (std::string(r.method) == "POST") return c.Post(r.path, h, r.body.dump(), "application/json");
  return c.Get(r.path, h);
}

class ServeAuthHttp : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra) {
    ASSERT_FALSE(tiny_model().empty());
    const std::string keys = testing::cli_scratch_dir("auth-keys") + "/keys";
    std::ofstream(keys) << "# one key per line\n" << kFileKey << "\n";
    std::vector<std::string> args = {"--threads", "1",      "--model-name",   "model",
                                     "--api-key", kFlagKey, "--api-key-file", keys};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(server_.start(tiny_model(), args)) << server_.log();
  }
  ServeProcess server_;
};

TEST_F(ServeAuthHttp, EveryRouteNeedsARightKeyButHealthAndMetricsByDefault) {
  start({});
  for (const Route& r : routes()) {
    const bool open = std::string(r.path) == "/health" || std::string(r.path) == "/metrics";
    for (const std::string bad : {"", "sk-wrong", "sk-flag-4f9a8b7c6d5", "sk-flag-4f9a8b7c6d5eX"}) {
      const httplib::Result res = send(server_.port(), r, bad);
      ASSERT_TRUE(res) << r.path;
      if (open) {
        EXPECT_EQ(res->status, 200) << r.path;
        continue;
      }
      EXPECT_EQ(res->status, 401) << r.path << " key '" << bad << "'";
      EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer") << r.path;
      const json e = json::parse(res->body, nullptr, false);
      ASSERT_TRUE(e.contains("error")) << res->body;
      EXPECT_EQ(e["error"]["code"], bad.empty() ? "missing_api_key" : "invalid_api_key");
    }
    for (const char* good : {kFlagKey, kFileKey}) {
      const httplib::Result res = send(server_.port(), r, good);
      ASSERT_TRUE(res) << r.path;
      EXPECT_EQ(res->status, 200) << r.path << ": " << res->body;
    }
  }
  const httplib::Result m = send(server_.port(), {"GET", "/metrics", nullptr}, "");
  ASSERT_TRUE(m);
  // 4 routes x 1 missing and 3 wrong keys.
  EXPECT_NE(m->body.find("detinfer_http_auth_failures_total{reason=\"missing\"} 4"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("detinfer_http_auth_failures_total{reason=\"invalid\"} 12"),
            std::string::npos);
  EXPECT_EQ(server_.signal_and_wait(SIGTERM, 20), 0);
  const std::string log = server_.log();
  for (const std::string& secret : {std::string(kFlagKey), std::string(kFileKey)}) {
    EXPECT_EQ(m->body.find(secret), std::string::npos) << "key in /metrics";
    EXPECT_EQ(log.find(secret), std::string::npos) << "key in the log: " << log;
  }
  EXPECT_NE(log.find("API keys required"), std::string::npos) << log;
}

// /health protected through the config file (auth.protect_health), /metrics by flag.
TEST_F(ServeAuthHttp, HealthAndMetricsProtectedByConfigAndFlag) {
  const std::string config = testing::cli_scratch_dir("auth-config") + "/serve.json";
  std::ofstream(config) << R"({"auth": {"protect_health": true}})";
  start({"--config", config, "--auth-metrics"});
  for (const Route& r : routes()) {
    const httplib::Result none = send(server_.port(), r, "");
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << r.path;
    const httplib::Result ok = send(server_.port(), r, kFileKey);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << r.path;
  }
}

TEST(ServeAuthConfig, BadKeysRefuseToStart) {
  ASSERT_FALSE(tiny_model().empty());
  const std::string dir = testing::cli_scratch_dir("auth-bad");
  std::ofstream(dir + "/empty") << "# no key\n";
  const auto r = testing::run_shell(testing::cli_path() + " serve --model " + tiny_model() +
                                    " --port 0 --api-key-file " + dir + "/empty 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.out + r.err).find("holds no key"), std::string::npos) << r.out << r.err;
  const auto missing = testing::run_shell(testing::cli_path() + " serve --model " + tiny_model() +
                                          " --port 0 --api-key-file " + dir + "/none 2>&1");
  EXPECT_NE(missing.exit_code, 0);
}

}  // namespace
}  // namespace detinfer
