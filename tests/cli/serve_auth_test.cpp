// serve_auth.h alone: the constant-time key comparison, Bearer parsing, key files and
// the 401 answer of ServeAuth::admit (no model, no network).
#include "serve_auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"

namespace detinfer_cli {
namespace {

using detinfer_http::Request;
using detinfer_http::Response;

// A fresh folder under /tmp (removed by the OS, never by the test).
std::string temp_dir() {
  char name[] = "/tmp/detinfer-serve-auth-XXXXXX";
  const char* made = mkdtemp(name);
  return made == nullptr ? std::string("/tmp") : std::string(made);
}

const std::vector<std::string> kKeys = {"sk-first-0123456789abcdef", "sk-second-key"};

TEST(ApiKeyMatches, AcceptsExactlyTheKeys) {
  EXPECT_TRUE(api_key_matches(kKeys, "sk-first-0123456789abcdef"));
  EXPECT_TRUE(api_key_matches(kKeys, "sk-second-key"));
  EXPECT_FALSE(api_key_matches(kKeys, "sk-first-0123456789abcde"));    // a prefix
  EXPECT_FALSE(api_key_matches(kKeys, "sk-first-0123456789abcdefX"));  // longer
  EXPECT_FALSE(api_key_matches(kKeys, "Sk-second-key"));
  EXPECT_FALSE(api_key_matches(kKeys, ""));
  EXPECT_FALSE(api_key_matches({}, ""));
  EXPECT_FALSE(api_key_matches({}, "anything"));
  // A byte past the shorter string counts as a difference, even when it is NUL.
  EXPECT_FALSE(api_key_matches({std::string("ab\0", 3)}, "ab"));
}

// Constant time by construction: the work depends only on the lengths, never on where
// (or whether) the presented key differs from a key, and every key is compared.
TEST(ApiKeyMatches, ComparesEveryByteOfEveryKeyWhateverMatches) {
  const std::string key(32, 'k');
  const std::vector<std::string> keys = {key, std::string(32, 'z'), std::string(20, 'q')};
  std::vector<std::string> presented = {key};  // a match on the first key
  for (std::size_t i = 0; i < key.size(); ++i) {
    std::string p = key;
    p[i] = 'x';  // differs at byte i: prefixes of every length match
    presented.push_back(p);
  }
  std::size_t first = 0;
  api_key_matches(keys, presented[0], &first);
  EXPECT_EQ(first, 32u + 32u + 32u);  // max(32, 32) per key, all three keys
  for (const auto& p : presented) {
    std::size_t n = 0;
    api_key_matches(keys, p, &n);
    EXPECT_EQ(n, first) << p;
  }
  std::size_t longer = 0;
  api_key_matches(keys, std::string(40, 'k'), &longer);
  EXPECT_EQ(longer, 40u * 3);
}

TEST(BearerToken, ParsesTheSchemeCaseInsensitively) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("BEARER abc"), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearerabc"), "");
  EXPECT_EQ(bearer_token(""), "");
}

TEST(ApiKeyFile, ReadsKeysSkippingCommentsAndRejectsBadFiles) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/keys";
  std::ofstream(path) << "# keys\n\n  sk-one  \nsk-two\r\n";
  EXPECT_EQ(read_api_key_file(path), (std::vector<std::string>{"sk-one", "sk-two"}));
  std::ofstream(dir + "/empty") << "# nothing\n\n";
  EXPECT_THROW(read_api_key_file(dir + "/empty"), detinfer::Error);
  std::ofstream(dir + "/bad") << "sk-one\nwith space\n";
  try {
    read_api_key_file(dir + "/bad");
    FAIL() << "a key with a space was accepted";
  } catch (const detinfer::Error& e) {
    EXPECT_EQ(e.code(), detinfer::ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), dir + "/bad:2");
    EXPECT_EQ(std::string(e.what()).find("with space"), std::string::npos);  // not echoed
  }
  EXPECT_THROW(read_api_key_file(dir + "/missing"), detinfer::Error);
  ApiKeyOptions o;
  o.keys = {"sk-flag"};
  o.key_file = path;
  EXPECT_EQ(resolve_api_keys(o), (std::vector<std::string>{"sk-flag", "sk-one", "sk-two"}));
  o.keys = {""};
  EXPECT_THROW(resolve_api_keys(o), detinfer::Error);
}

// Records what a handler answered.
class Recorder : public detinfer_http::ResponseWriter {
 public:
  void respond(Response r) override { response = std::move(r), responded = true; }
  bool start_stream(int, const std::string&, const detinfer_http::Headers&) override {
    return false;
  }
  bool write(std::string_view) override { return false; }
  void finish() override {}
  bool client_gone() const override { return false; }
  void on_client_gone(std::function<void()>) override {}
  Response response;
  bool responded = false;
};

Request request(const std::string& method, const std::string& path, const std::string& auth) {
  Request q;
  q.method = method;
  q.path = path;
  q.target = path;
  if (!auth.empty()) q.headers.emplace_back("Authorization", auth);
  return q;
}

std::string header(const Response& r, const std::string& name) {
  for (const auto& h : r.headers) {
    if (detinfer_http::iequals(h.first, name)) return h.second;
  }
  return "";
}

TEST(ServeAuth, RefusesWithOpenAiErrorAndCountsWithoutTheKey) {
  detinfer::MetricsRegistry metrics;
  const ServeAuth auth(kKeys, false, false, metrics);
  ASSERT_TRUE(auth.enabled());
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/nowhere"}) {
    Recorder w;
    EXPECT_FALSE(auth.admit(request("POST", path, ""), w)) << path;
    ASSERT_TRUE(w.responded);
    EXPECT_EQ(w.response.status, 401);
    EXPECT_EQ(header(w.response, "WWW-Authenticate"), "Bearer");
    const auto body = nlohmann::json::parse(w.response.body);
    EXPECT_EQ(body["error"]["code"], "missing_api_key");
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    Recorder wrong;
    EXPECT_FALSE(auth.admit(request("POST", path, "Bearer sk-guess-attempt"), wrong));
    EXPECT_EQ(wrong.response.status, 401);
    EXPECT_EQ(nlohmann::json::parse(wrong.response.body)["error"]["code"], "invalid_api_key");
    EXPECT_EQ(wrong.response.body.find("sk-guess-attempt"), std::string::npos);
    Recorder right;
    EXPECT_TRUE(auth.admit(request("POST", path, "Bearer sk-second-key"), right));
    EXPECT_FALSE(right.responded);
  }
  // Open by default: /health, /metrics and CORS preflights.
  for (const auto& q : {request("GET", "/health", ""), request("GET", "/metrics", ""),
                        request("OPTIONS", "/v1/completions", "")}) {
    Recorder w;
    EXPECT_TRUE(auth.admit(q, w)) << q.method << " " << q.path;
  }
  const std::string text = metrics.render();
  EXPECT_NE(text.find("detinfer_http_auth_failures_total{reason=\"missing\"} 4"), std::string::npos)
      << text;
  EXPECT_NE(text.find("detinfer_http_auth_failures_total{reason=\"invalid\"} 4"), std::string::npos)
      << text;
  for (const auto& k : kKeys) EXPECT_EQ(text.find(k), std::string::npos);
  EXPECT_EQ(text.find("sk-guess-attempt"), std::string::npos);
}

TEST(ServeAuth, ProtectsHealthAndMetricsByFlagAndIsOffWithoutKeys) {
  detinfer::MetricsRegistry metrics;
  const ServeAuth strict(kKeys, true, true, metrics);
  for (const char* path : {"/health", "/metrics"}) {
    Recorder w;
    EXPECT_FALSE(strict.admit(request("GET", path, ""), w)) << path;
    EXPECT_EQ(w.response.status, 401);
    Recorder ok;
    EXPECT_TRUE(strict.admit(request("GET", path, "Bearer sk-first-0123456789abcdef"), ok));
  }
  const ServeAuth off({}, true, true, metrics);
  EXPECT_FALSE(off.enabled());
  Recorder w;
  EXPECT_TRUE(off.admit(request("POST", "/v1/completions", ""), w));
}

}  // namespace
}  // namespace detinfer_cli
