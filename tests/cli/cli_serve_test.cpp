// Starts the real `detinfer serve` on a free loopback port and talks to it over HTTP:
// reproducibility under 32 concurrent requests, streaming, every error class, the info
// endpoints, a full queue, `detinfer consistency --url`, and SIGTERM.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::cli_path;
using testing::ServeProcess;

constexpr std::size_t kMaxBodyBytes = 32768;

httplib::Client client_for(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(120, 0);
  return c;
}

// POST /v1/completions with a JSON body (Content-Type application/json).
httplib::Result post(int port, const std::string& body) {
  httplib::Client c = client_for(port);
  return c.Post("/v1/completions", body, "application/json");
}

// {status, parsed body}; status -1 when no response came back.
std::pair<int, json> complete(int port, const json& body) {
  const httplib::Result r = post(port, body.dump());
  if (!r) return {-1, json(httplib::to_string(r.error()))};
  return {r->status, json::parse(r->body, nullptr, false)};
}

// The `data:` payloads of a server-sent-events body, in order.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) events.push_back(line.substr(6));
  }
  return events;
}

// One sample line of the Prometheus text format: name{labels} value.
struct Sample {
  std::string family;  // name without a _bucket/_sum/_count suffix of a histogram
  std::string series;  // name{labels}
  double value = 0;
};

// Parses Prometheus text 0.0.4 strictly enough to catch malformed output: every sample
// belongs to a family announced once by # HELP and # TYPE before its samples.
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  std::map<std::string, double> series;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helps.insert(name).second) << "duplicate HELP for " << name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      EXPECT_TRUE(types.emplace(name, type).second) << "duplicate TYPE for " << name;
      EXPECT_TRUE(helps.count(name)) << "TYPE before HELP for " << name;
      continue;
    }
    EXPECT_NE(line[0], '#') << line;
    const auto space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space);
    const std::string name = key.substr(0, key.find('{'));
    std::string family = name;
    if (!types.count(family)) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s(suffix);
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
          family = name.substr(0, name.size() - s.size());
        }
      }
      EXPECT_EQ(types[family], "histogram") << "sample before its TYPE: " << line;
    }
    char* end = nullptr;
    const std::string v = line.substr(space + 1);
    const double d = std::strtod(v.c_str(), &end);
    EXPECT_TRUE(end != nullptr && *end == '\0' && !v.empty()) << "bad value: " << line;
    EXPECT_TRUE(series.emplace(key, d).second) << "duplicate series " << key;
  }
  return series;
}

// The tiny model, written once per test program by `detinfer make-tiny-model`.
const std::string& tiny_model() {
  static const std::string dir =
      testing::make_tiny_model_with_cli(testing::cli_scratch_dir("tiny"));
  return dir;
}

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(tiny_model());
    if (model_->empty()) return;
    server_ = new ServeProcess();
    if (!server_->start(*model_,
                        {"--threads", "1", "--max-body-bytes", std::to_string(kMaxBodyBytes)})) {
      start_log_ = new std::string(server_->log());
      delete server_;
      server_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      // The shared server is stopped like the shutdown test's: SIGTERM, exit 0.
      EXPECT_EQ(server_->signal_and_wait(SIGTERM, 20), 0) << server_->log();
      delete server_;
      server_ = nullptr;
    }
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(model_ != nullptr && !model_->empty()) << "detinfer make-tiny-model failed";
    ASSERT_TRUE(server_ != nullptr) << "detinfer serve did not start:\n"
                                    << (start_log_ ? *start_log_ : "");
  }
  static int port() { return server_->port(); }

  // The server answers a good request (it survived whatever came before).
  static void expect_still_serving() {
    const auto [status, body] = complete(port(), {{"prompt", "still there?"}, {"max_tokens", 2}});
    EXPECT_EQ(status, 200) << body;
    httplib::Client c = client_for(port());
    const auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
  }

  static std::string* model_;
  static ServeProcess* server_;
  static std::string* start_log_;
};
std::string* Serve::model_ = nullptr;
ServeProcess* Serve::server_ = nullptr;
std::string* Serve::start_log_ = nullptr;

// 32 identical requests at once (batched together by the session) give exactly the
// answer the same request gets alone: text and chain digest.
void expect_concurrent_equals_alone(int port, const json& request) {
  const auto [alone_status, alone] = complete(port, request);
  ASSERT_EQ(alone_status, 200) << alone;
  const std::string text = alone["choices"][0]["text"].get<std::string>();
  const std::string digest = alone["detinfer"]["digest"].get<std::string>();
  ASSERT_EQ(digest.size(), 16u);

  constexpr int kClients = 32;
  std::vector<std::pair<int, json>> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] { got[i] = complete(port, request); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(got[i].first, 200) << i << ": " << got[i].second;
    EXPECT_EQ(got[i].second["choices"][0]["text"], text) << i;
    EXPECT_EQ(got[i].second["detinfer"]["digest"], digest) << i;
    EXPECT_EQ(got[i].second["system_fingerprint"], alone["system_fingerprint"]) << i;
  }
}

TEST_F(Serve, ConcurrentGreedyRequestsMatchTheRequestAlone) {
  expect_concurrent_equals_alone(port(), {{"prompt", "The quick brown fox"},
                                          {"max_tokens", 12},
                                          {"temperature", 0},
                                          {"ignore_eos", true}});
}

TEST_F(Serve, ConcurrentSampledRequestsMatchTheRequestAlone) {
  expect_concurrent_equals_alone(port(), {{"prompt", "Once upon a time"},
                                          {"max_tokens", 12},
                                          {"temperature", 0.8},
                                          {"seed", 1234},
                                          {"ignore_eos", true}});
}

TEST_F(Serve, ResponseHasTheOpenAiShape) {
  const auto [status, r] = complete(port(), {{"prompt", "Hello"},
                                             {"max_tokens", 5},
                                             {"temperature", 0.5},
                                             {"seed", 3},
                                             {"ignore_eos", true},
                                             {"logprobs", 2}});
  ASSERT_EQ(status, 200) << r;
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_TRUE(r["id"].is_string());
  EXPECT_EQ(r["system_fingerprint"].get<std::string>().rfind("fp_", 0), 0u);
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"].size(), 5u);
  EXPECT_EQ(r["usage"]["completion_tokens"], 5);
  EXPECT_EQ(r["usage"]["total_tokens"],
            r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
  EXPECT_EQ(r["detinfer"]["seed"], 3);
  EXPECT_FALSE(r["detinfer"].contains("fingerprint"));

  // ?fingerprint=full and the X-Detinfer-Fingerprint header return the RunFingerprint.
  httplib::Client c = client_for(port());
  const std::string body = json{{"prompt", "Hello"}, {"max_tokens", 3}, {"seed", 3}}.dump();
  const auto q = c.Post("/v1/completions?fingerprint=full", body, "application/json");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->status, 200) << q->body;
  const json fq = json::parse(q->body)["detinfer"]["fingerprint"];
  EXPECT_TRUE(fq.is_object()) << q->body;
  const auto h =
      c.Post("/v1/completions", {{"X-Detinfer-Fingerprint", "full"}}, body, "application/json");
  ASSERT_TRUE(h);
  ASSERT_EQ(h->status, 200) << h->body;
  EXPECT_EQ(json::parse(h->body)["detinfer"]["fingerprint"], fq);
}

TEST_F(Serve, StreamedChunksConcatenateToTheNonStreamedText) {
  for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 0.9}, {"seed", 5}}}) {
    json request = {{"prompt", "Stream me"}, {"max_tokens", 16}, {"ignore_eos", true}};
    request.update(sampling);
    const auto [status, whole] = complete(port(), request);
    ASSERT_EQ(status, 200) << whole;

    request["stream"] = true;
    const httplib::Result r = post(port(), request.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    const std::vector<std::string> events = sse_events(r->body);
    ASSERT_GE(events.size(), 3u) << r->body;
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text;
    json last;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
      const json chunk = json::parse(events[i], nullptr, false);
      ASSERT_FALSE(chunk.is_discarded()) << events[i];
      EXPECT_EQ(chunk["object"], "text_completion");
      EXPECT_EQ(chunk["system_fingerprint"], whole["system_fingerprint"]);
      text += chunk["choices"][0]["text"].get<std::string>();
      last = chunk;
    }
    EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>()) << request;
    EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(last["detinfer"]["digest"], whole["detinfer"]["digest"]);
  }
}

// Every class of bad request: the right status, an OpenAI-style error naming the
// parameter, and a server that keeps serving.
TEST_F(Serve, BadRequestsGetJsonErrorsAndTheServerKeepsServing) {
  struct Case {
    const char* name;
    std::string body;
    int status;
    const char* param;  // nullptr: no single parameter
  };
  std::vector<std::int32_t> too_long(2100, 7);
  const std::vector<Case> cases = {
      {"malformed JSON", "{\"prompt\": \"hi\", ", 400, nullptr},
      {"not an object", "[1, 2, 3]", 400, nullptr},
      {"wrong type", R"({"prompt": "hi", "max_tokens": "ten"})", 400, "max_tokens"},
      {"wrong type (bool)", R"({"prompt": "hi", "stream": "yes"})", 400, "stream"},
      {"out of range", R"({"prompt": "hi", "temperature": 7.5})", 400, "temperature"},
      {"out of range (n)", R"({"prompt": "hi", "n": 0})", 400, "n"},
      {"unknown parameter", R"({"prompt": "hi", "frobnicate": 1})", 400, "frobnicate"},
      {"missing prompt", R"({"max_tokens": 4})", 400, "prompt"},
      {"prompt too long", json{{"prompt", too_long}, {"max_tokens", 4}}.dump(), 400, "prompt"},
      {"prompt + max_tokens too long",
       json{{"prompt", std::vector<std::int32_t>(2040, 7)}, {"max_tokens", 100}}.dump(), 400,
       "max_tokens"},
      {"token id out of range", R"({"prompt": [1, 2, 99999]})", 400, "prompt"},
      {"negative token id", R"({"prompt": [1, -2]})", 400, "prompt"},
      {"unknown model", R"({"prompt": "hi", "model": "gpt-4"})", 404, "model"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const httplib::Result r = post(port(), c.body);
    ASSERT_TRUE(r) << "no response";
    EXPECT_EQ(r->status, c.status) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    if (c.param != nullptr) {
      EXPECT_EQ(e["error"]["param"], c.param) << r->body;
    } else {
      EXPECT_TRUE(e["error"]["param"].is_null()) << r->body;
    }
  }
  expect_still_serving();

  // A body over --max-body-bytes: 413 with a JSON error, and still serving.
  const std::string big =
      json{{"prompt", std::string(kMaxBodyBytes + 1000, 'a')}, {"max_tokens", 1}}.dump();
  const httplib::Result r = post(port(), big);
  ASSERT_TRUE(r) << "no response to an oversized body";
  EXPECT_EQ(r->status, 413);
  const json e = json::parse(r->body, nullptr, false);
  EXPECT_TRUE(e.is_object() && e.contains("error")) << r->body;
  expect_still_serving();

  // An unknown endpoint: 404 with a JSON error.
  httplib::Client cl = client_for(port());
  const auto nf = cl.Get("/v1/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_TRUE(json::parse(nf->body, nullptr, false).contains("error")) << nf->body;
}

TEST_F(Serve, ModelsAndHealth) {
  httplib::Client c = client_for(port());
  const auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  const json models = json::parse(m->body, nullptr, false);
  ASSERT_TRUE(models.is_object()) << m->body;
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  const std::string name = models["data"][0]["id"].get<std::string>();
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["detinfer"]["model_fingerprint"].get<std::string>().size(), 32u);
  // The listed id is accepted as "model".
  EXPECT_EQ(complete(port(), {{"prompt", "hi"}, {"max_tokens", 1}, {"model", name}}).first, 200);

  const auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body, nullptr, false)["status"], "ok");
}

TEST_F(Serve, MetricsParseAndCountersMove) {
  httplib::Client c = client_for(port());
  const auto before_r = c.Get("/metrics");
  ASSERT_TRUE(before_r);
  ASSERT_EQ(before_r->status, 200);
  EXPECT_NE(before_r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const auto before = parse_metrics(before_r->body);

  ASSERT_EQ(
      complete(port(), {{"prompt", "count me"}, {"max_tokens", 3}, {"ignore_eos", true}}).first,
      200);
  ASSERT_EQ(complete(port(), {{"prompt", "hi"}, {"bogus", 1}}).first, 400);

  auto get = [](const std::map<std::string, double>& m, const std::string& k) {
    const auto it = m.find(k);
    EXPECT_NE(it, m.end()) << "missing " << k;
    return it == m.end() ? 0.0 : it->second;
  };
  const std::string ok = "detinfer_http_requests_total{class=\"2xx\"}";
  const std::string bad = "detinfer_http_requests_total{class=\"4xx\"}";
  const std::string length = "detinfer_requests_total{finish_reason=\"length\"}";
  // The HTTP counters move once a response has been written, which may be just after
  // the client read it: poll (briefly) until the completion and the first /metrics
  // (2xx) and the rejected request (4xx) are counted.
  std::map<std::string, double> after;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    const auto after_r = c.Get("/metrics");
    ASSERT_TRUE(after_r);
    after = parse_metrics(after_r->body);
    if (get(after, ok) >= get(before, ok) + 2 && get(after, bad) >= get(before, bad) + 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_GE(get(after, ok), get(before, ok) + 2);
  EXPECT_GE(get(after, bad), get(before, bad) + 1);
  EXPECT_GE(get(after, length), get(before, length) + 1);
  EXPECT_GE(get(after, "detinfer_generated_tokens_total"),
            get(before, "detinfer_generated_tokens_total") + 3);
  EXPECT_GT(get(after, "detinfer_prompt_tokens_total"),
            get(before, "detinfer_prompt_tokens_total"));
  EXPECT_GT(get(after, "detinfer_kv_blocks_capacity"), 0);
}

TEST_F(Serve, ConsistencyUrlAuditReportsOneDistinctOutput) {
  const auto r = testing::run_shell(
      cli_path() + " consistency --url http://127.0.0.1:" + std::to_string(port()) +
      " --runs 20 --max-new-tokens 8 --temperature 0 --concurrency 2"
      " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["mode"], "url");
  EXPECT_EQ(j["runs"], 20);
  EXPECT_EQ(j["distinct_outputs"], 1) << r.out;
  EXPECT_EQ(j["most_common_count"], 20);
}

// A server with room for one running and one waiting request: a flood gets 429s with
// Retry-After and JSON errors, and every accepted request still completes.
TEST(ServeLimits, FullQueueAnswers429WithRetryAfter) {
  const std::string& model = tiny_model();
  ASSERT_FALSE(model.empty());
  ServeProcess server;
  ASSERT_TRUE(server.start(model, {"--threads", "1", "--max-queue", "1", "--max-batch", "1"}))
      << server.log();
  // Long enough (hundreds of steps) that the flood arrives while the first still runs.
  constexpr int kClients = 16;
  const json request = {{"prompt", "flood"}, {"max_tokens", 400}, {"ignore_eos", true}};
  struct Answer {
    int status = -1;  // -1: no response
    std::string body;
    std::string retry_after;
  };
  std::vector<Answer> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      const httplib::Result r = post(server.port(), request.dump());
      if (r) got[i] = {r->status, r->body, r->get_header_value("Retry-After")};
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, limited = 0;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_NE(got[i].status, -1) << "request " << i << " got no response";
    if (got[i].status == 200) {
      ++ok;
      continue;
    }
    ASSERT_EQ(got[i].status, 429) << got[i].body;
    ++limited;
    EXPECT_FALSE(got[i].retry_after.empty());
    const json e = json::parse(got[i].body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << got[i].body;
    EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(limited, 1);
  // After the flood the server serves again.
  EXPECT_EQ(complete(server.port(), {{"prompt", "after"}, {"max_tokens", 2}}).first, 200);
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 20), 0) << server.log();
}

// SIGTERM while a long request streams (--shutdown-timeout 0.1 s, so it is usually
// cancelled): the server stops accepting, the request ends with [DONE], the
// process exits 0 within seconds, and the port is closed.
TEST(ServeShutdown, SigtermExitsZeroAndClosesThePort) {
  const std::string& model = tiny_model();
  ASSERT_FALSE(model.empty());
  ServeProcess server;
  ASSERT_TRUE(server.start(model, {"--threads", "1", "--shutdown-timeout", "0.1"})) << server.log();
  const int port = server.port();
  ASSERT_EQ(complete(port, {{"prompt", "warm"}, {"max_tokens", 2}}).first, 200);

  // A long request in flight when the signal lands: the signal is sent once its first
  // streamed bytes have arrived (not after a guessed delay).
  std::promise<void> first_bytes;
  std::string streamed;
  std::thread inflight([&] {
    httplib::Client c = client_for(port);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body =
        json{{"prompt", "long"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}}
            .dump();
    bool signalled = false;
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      streamed.append(data, n);
      if (!signalled) first_bytes.set_value();
      signalled = true;
      return true;
    };
    c.send(req);
    if (!signalled) first_bytes.set_value();  // no response: the checks below fail
  });
  first_bytes.get_future().wait();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 15), 0) << server.log();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  inflight.join();
  EXPECT_LT(seconds, 15.0);
  // The in-flight request ended properly: finished or cancelled, then [DONE].
  const std::vector<std::string> events = sse_events(streamed);
  ASSERT_GE(events.size(), 2u) << streamed.substr(0, 500);
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_TRUE(last.is_object()) << events[events.size() - 2];
  const json reason = last["choices"][0]["finish_reason"];
  EXPECT_TRUE(reason == "cancelled" || reason == "length") << reason;
  std::cerr << "in-flight request at SIGTERM: " << reason << " after " << events.size()
            << " events; exit after " << seconds << " s\n";
  EXPECT_NE(server.log().find("stopped"), std::string::npos) << server.log();

  httplib::Client c = client_for(port);
  c.set_connection_timeout(2, 0);
  const auto after = c.Get("/health");
  EXPECT_FALSE(after) << "the port still answers after exit";
}

}  // namespace
}  // namespace detinfer
