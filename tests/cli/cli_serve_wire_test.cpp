// `detinfer serve` against the defects of issue 15, each driven from outside like a client
// would (httplib for ordinary requests, raw sockets for the rest): client errors are 400
// (never 500), a request that can never fit is 400 (not 429), drawn seeds survive float64
// JSON parsers, OpenAI's logprobs / streaming / usage / model / method / CORS behaviour,
// keep-alive and pipelining, a departed client cancels its work, and shutdown is bounded.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/cli_test_support.h"
#include "cli/raw_http.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::get_request;
using testing::post_request;
using testing::RawConn;
using testing::RawResponse;
using testing::ServeProcess;

constexpr const char* kOrigin = "https://app.example";

const std::string& tiny_model() {
  static const std::string dir =
      testing::make_tiny_model_with_cli(testing::cli_scratch_dir("tiny"));
  return dir;
}

std::pair<int, json> complete(int port, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  const auto r = c.Post("/v1/completions", body.dump(), "application/json");
  if (!r) return {-1, json(nullptr)};
  return {r->status, json::parse(r->body, nullptr, false)};
}

std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data, nullptr, false));
  }
  return events;
}

double metric(int port, const std::string& series) {
  httplib::Client c("127.0.0.1", port);
  const auto r = c.Get("/metrics");
  if (!r) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return 0;
}

// Waits (up to 20 s) until a request is generating (holds KV blocks).
void wait_generating(int port) {
  for (int i = 0; i < 2000 && metric(port, "detinfer_kv_blocks_in_use") <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Long enough (4 x 2000 tokens) to be still running when the test acts on it.
const json kLongRequest = {{"prompt", "long"},   {"max_tokens", 2000}, {"n", 4},
                           {"temperature", 1.0}, {"seed", 1},          {"ignore_eos", true}};

class ServeWire : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (tiny_model().empty()) return;
    server_ = new ServeProcess();
    if (!server_->start(tiny_model(), {"--threads", "1", "--max-body-bytes", "65536",
                                       "--cors-origin", kOrigin})) {
      log_ = new std::string(server_->log());
      delete server_;
      server_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      EXPECT_EQ(server_->signal_and_wait(SIGTERM, 20), 0);
    }
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(tiny_model().empty());
    ASSERT_TRUE(server_ != nullptr) << (log_ ? *log_ : "");
  }
  static int port() { return server_->port(); }
  static json expect_400(const std::string& body, const char* param) {
    RawConn c(port());
    EXPECT_TRUE(c.send(post_request("/v1/completions", body)));
    const RawResponse r = c.read_response(30);
    EXPECT_EQ(r.status, 400) << r.body;
    const json e = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(e.contains("error")) << r.body;
    if (param == nullptr) {
      EXPECT_TRUE(e["error"]["param"].is_null()) << r.body;
    } else {
      EXPECT_EQ(e["error"]["param"], param) << r.body;
    }
    EXPECT_EQ(r.headers.count("retry-after"), 0u);
    return e;
  }
  static ServeProcess* server_;
  static std::string* log_;
};
ServeProcess* ServeWire::server_ = nullptr;
std::string* ServeWire::log_ = nullptr;

// Defect 5 (and 11: a NUL byte no longer ends the JSON).
TEST_F(ServeWire, ClientErrorsInTheBodyAre400WithAClearMessage) {
  const json overflow = expect_400(R"({"prompt": "hi", "user": 1e400})", nullptr);
  EXPECT_NE(overflow["error"]["message"].get<std::string>().find("1e400"), std::string::npos);
  expect_400(R"({"prompt": "hi", "temperature": -1e400})", nullptr);
  const json utf8 = expect_400("{\"prompt\": \"caf\xc3\x28\"}", nullptr);
  EXPECT_NE(utf8["error"]["message"].get<std::string>().find("UTF-8"), std::string::npos);
  expect_400("{\"prompt\": \"\xed\xa0\x80\"}", nullptr);  // an encoded surrogate
  const json nul = expect_400(std::string("{\"prompt\": \"hi\"}\0{\"junk\"", 25), nullptr);
  EXPECT_NE(nul["error"]["message"].get<std::string>().find("NUL"), std::string::npos);
  expect_400(std::string(10000, '[') + std::string(10000, ']'), nullptr);
  expect_400(R"({"prompt": "hi", "stream_options": {"include_usage": true}})", "stream_options");
  EXPECT_EQ(complete(port(), {{"prompt", "still fine"}, {"max_tokens", 1}}).first, 200);
}

// Speculative decoding per request (docs/speculative.md): `draft_tokens` gives the same
// text, digest and logprobs, whole and streamed; out of range or with beams it is a 400
// naming it.
TEST_F(ServeWire, DraftTokensChangeNoResponseAndBadValuesAre400) {
  for (const json& base :
       {json{{"prompt", "the cat sat on the mat. the cat sat on the mat. the cat"},
             {"max_tokens", 20},
             {"temperature", 0},
             {"ignore_eos", true},
             {"logprobs", 2}},
        json{{"prompt", "one two one two one two one"},
             {"max_tokens", 20},
             {"temperature", 0.6},
             {"seed", 5},
             {"ignore_eos", true},
             {"logprobs", 2}}}) {
    const auto [s0, plain] = complete(port(), base);
    ASSERT_EQ(s0, 200) << plain;
    for (int k : {1, 4, 8}) {
      json spec = base;
      spec["draft_tokens"] = k;
      const auto [s1, r] = complete(port(), spec);
      ASSERT_EQ(s1, 200) << r;
      EXPECT_EQ(r["choices"][0]["text"], plain["choices"][0]["text"]) << k;
      EXPECT_EQ(r["choices"][0]["logprobs"], plain["choices"][0]["logprobs"]) << k;
      EXPECT_EQ(r["detinfer"]["digest"], plain["detinfer"]["digest"]) << k;
    }
    json streamed = base;
    streamed["draft_tokens"] = 4;
    streamed["stream"] = true;
    httplib::Client c("127.0.0.1", port());
    const auto st = c.Post("/v1/completions", streamed.dump(), "application/json");
    ASSERT_TRUE(st);
    std::string text;
    for (const json& ev : sse_events(st->body)) {
      if (ev.is_object() && ev.contains("choices") && !ev["choices"].empty()) {
        text += ev["choices"][0].value("text", "");
      }
    }
    EXPECT_EQ(text, plain["choices"][0]["text"].get<std::string>());
  }
  expect_400(R"({"prompt": "hi", "draft_tokens": 9})", "draft_tokens");
  expect_400(R"({"prompt": "hi", "temperature": 0, "draft_tokens": 2, "num_beams": 2})",
             "draft_tokens");
  expect_400(R"({"prompt": "hi", "draft_ngram_min": 3, "draft_ngram_max": 2})", "draft_ngram_min");
  // This server has no draft model.
  expect_400(R"({"prompt": "hi", "draft_tokens": 2, "draft_with_model": true})",
             "draft_with_model");
}

// A server with --draft-model (the model itself as its draft): draft_with_model requests
// answer what plain requests answer, whole and streamed.
TEST_F(ServeWire, DraftModelRequestsChangeNoResponse) {
  ServeProcess drafting;
  ASSERT_TRUE(drafting.start(tiny_model(), {"--threads", "1", "--draft-model", tiny_model()}))
      << drafting.log();
  const json base{{"prompt", "a draft model proposes"},
                  {"max_tokens", 16},
                  {"temperature", 0.6},
                  {"seed", 9},
                  {"ignore_eos", true},
                  {"logprobs", 2}};
  const auto [s0, plain] = complete(port(), base);
  ASSERT_EQ(s0, 200) << plain;
  for (int k : {1, 4}) {
    json spec = base;
    spec["draft_tokens"] = k;
    spec["draft_with_model"] = true;
    const auto [s1, r] = complete(drafting.port(), spec);
    ASSERT_EQ(s1, 200) << r;
    EXPECT_EQ(r["choices"][0]["text"], plain["choices"][0]["text"]) << k;
    EXPECT_EQ(r["choices"][0]["logprobs"], plain["choices"][0]["logprobs"]) << k;
    EXPECT_EQ(r["detinfer"]["digest"], plain["detinfer"]["digest"]) << k;
  }
  // The same through the `speculative` object.
  json obj = base;
  obj["speculative"] = {{"mode", "draft"}, {"draft_tokens", 3}};
  const auto [s2, r2] = complete(drafting.port(), obj);
  ASSERT_EQ(s2, 200) << r2;
  EXPECT_EQ(r2["choices"][0]["text"], plain["choices"][0]["text"]);
  EXPECT_EQ(r2["detinfer"]["digest"], plain["detinfer"]["digest"]);
  EXPECT_EQ(drafting.signal_and_wait(SIGTERM, 20), 0);
}

// `serve --speculative ngram`: requests that choose no drafter get the server's (the same
// responses as a plain server, and the n-gram counters move); a request's own choice,
// "off" included, wins; beam search is left alone; `--speculative draft` without
// --draft-model stops the server at startup.
TEST_F(ServeWire, ServerDefaultDrafterChangesNoResponse) {
  ServeProcess spec;
  ASSERT_TRUE(spec.start(tiny_model(), {"--threads", "1", "--speculative", "ngram"})) << spec.log();
  const json base{{"prompt", "the cat sat on the mat. the cat sat on the mat. the cat"},
                  {"max_tokens", 16},
                  {"temperature", 0},
                  {"ignore_eos", true},
                  {"logprobs", 1}};
  const std::string drafted = "detinfer_speculative_draft_tokens_total{drafter=\"ngram\"}";
  const auto [s0, plain] = complete(port(), base);
  ASSERT_EQ(s0, 200) << plain;
  const auto [s1, r] = complete(spec.port(), base);
  ASSERT_EQ(s1, 200) << r;
  EXPECT_EQ(r["choices"][0], plain["choices"][0]);
  EXPECT_EQ(r["detinfer"]["digest"], plain["detinfer"]["digest"]);
  const double after_default = metric(spec.port(), drafted);
  EXPECT_GT(after_default, 0);
  json off = base;
  off["speculative"] = {{"mode", "off"}};
  const auto [s2, r2] = complete(spec.port(), off);
  ASSERT_EQ(s2, 200) << r2;
  EXPECT_EQ(r2["detinfer"]["digest"], plain["detinfer"]["digest"]);
  EXPECT_EQ(metric(spec.port(), drafted), after_default);  // the client's "off" won
  json beams = base;
  beams["num_beams"] = 2;
  beams.erase("logprobs");
  beams.erase("ignore_eos");
  const auto [s3, r3] = complete(spec.port(), beams);
  EXPECT_EQ(s3, 200) << r3;
  EXPECT_EQ(spec.signal_and_wait(SIGTERM, 20), 0);
  ServeProcess no_draft_model;
  EXPECT_FALSE(no_draft_model.start(tiny_model(), {"--threads", "1", "--speculative", "draft"}));
  EXPECT_NE(no_draft_model.log().find("--draft-model"), std::string::npos) << no_draft_model.log();
}

// The per-request `speculative` object (docs/server.md): modes off and ngram answer what
// plain requests answer; a malformed object, an unknown key
// or mode, a value out of range, or a flat draft_* parameter beside it is a 400 naming
// `speculative`.
TEST_F(ServeWire, SpeculativeObjectChangesNoResponseAndBadObjectsAre400) {
  const json base{{"prompt", "one two three. one two three. one two"},
                  {"max_tokens", 16},
                  {"temperature", 0.6},
                  {"seed", 11},
                  {"ignore_eos", true},
                  {"logprobs", 1}};
  const auto [s0, plain] = complete(port(), base);
  ASSERT_EQ(s0, 200) << plain;
  for (const json& spec : {json{{"mode", "ngram"}}, json{{"mode", "off"}},
                           json{{"mode", "ngram"}, {"draft_tokens", 8}, {"ngram_min", 2}},
                           json{{"mode", "ngram"}, {"ngram_max", 1}}}) {
    json req = base;
    req["speculative"] = spec;
    const auto [s1, r] = complete(port(), req);
    ASSERT_EQ(s1, 200) << r << spec;
    EXPECT_EQ(r["choices"][0]["text"], plain["choices"][0]["text"]) << spec;
    EXPECT_EQ(r["choices"][0]["logprobs"], plain["choices"][0]["logprobs"]) << spec;
    EXPECT_EQ(r["detinfer"]["digest"], plain["detinfer"]["digest"]) << spec;
  }
  for (const char* bad :
       {R"({"prompt": "hi", "speculative": "ngram"})", R"({"prompt": "hi", "speculative": {}})",
        R"({"prompt": "hi", "speculative": {"mode": "eagle"}})",
        R"({"prompt": "hi", "speculative": {"mode": "ngram", "draft_tokens": 9}})",
        R"({"prompt": "hi", "speculative": {"mode": "ngram", "draft_tokens": 1.5}})",
        R"({"prompt": "hi", "speculative": {"mode": "ngram", "ngram_min": 3, "ngram_max": 2}})",
        R"({"prompt": "hi", "speculative": {"mode": "ngram", "lookahead": 2}})",
        R"({"prompt": "hi", "speculative": {"mode": "ngram"}, "draft_tokens": 2})"}) {
    const json e = expect_400(bad, "speculative");
    EXPECT_NE(e["error"]["message"].get<std::string>().find("speculative"), std::string::npos) << e;
  }
  // This server has no draft model: the session names the field.
  expect_400(R"({"prompt": "hi", "speculative": {"mode": "draft"}})", "draft_with_model");
}

// Defect 7: can never fit -> 400 naming the limit, no Retry-After.
TEST_F(ServeWire, ARequestThatCanNeverFitIs400Not429) {
  const json e =
      expect_400(json{{"prompt", "hi"}, {"n", 64}, {"max_tokens", 2040}, {"temperature", 1}}.dump(),
                 "max_tokens");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("KV"), std::string::npos) << e;
}

// Defect 8: drawn seeds are below 2^53 and reproduce the response.
TEST_F(ServeWire, DrawnSeedsSurviveFloat64AndReproduce) {
  for (int i = 0; i < 8; ++i) {
    const json req = {
        {"prompt", "seedless"}, {"max_tokens", 6}, {"temperature", 0.9}, {"ignore_eos", true}};
    const auto [status, r] = complete(port(), req);
    ASSERT_EQ(status, 200) << r;
    const std::uint64_t seed = r["detinfer"]["seed"].get<std::uint64_t>();
    EXPECT_LT(seed, std::uint64_t{1} << 53);
    // What a float64 client reads back is the same number, and reproduces the answer.
    const double as_double = json::parse(r.dump())["detinfer"]["seed"].get<double>();
    EXPECT_EQ(static_cast<std::uint64_t>(as_double), seed);
    json again = req;
    again["seed"] = seed;
    const auto [s2, r2] = complete(port(), again);
    ASSERT_EQ(s2, 200);
    EXPECT_EQ(r2["detinfer"]["digest"], r["detinfer"]["digest"]);
    EXPECT_EQ(r2["choices"][0]["text"], r["choices"][0]["text"]);
  }
}

// Defect 9: logprobs 0, streamed logprobs, code-point text offsets, distinct keys.
TEST_F(ServeWire, LogprobsFollowOpenAi) {
  const json base = {{"prompt", "h\u00e9llo w\u00f6rld"},
                     {"max_tokens", 8},
                     {"temperature", 0.7},
                     {"seed", 11},
                     {"ignore_eos", true}};
  json zero = base;
  zero["logprobs"] = 0;
  const auto [s0, r0] = complete(port(), zero);
  ASSERT_EQ(s0, 200) << r0;
  const json lp0 = r0["choices"][0]["logprobs"];
  ASSERT_EQ(lp0["token_logprobs"].size(), 8u) << r0;
  for (const json& v : lp0["token_logprobs"]) EXPECT_TRUE(v.is_number());
  for (const json& t : lp0["top_logprobs"]) EXPECT_TRUE(t.is_object() && t.empty()) << t;

  json five = base;
  five["logprobs"] = 5;
  five["echo"] = true;
  const auto [s5, r5] = complete(port(), five);
  ASSERT_EQ(s5, 200) << r5;
  const json lp5 = r5["choices"][0]["logprobs"];
  EXPECT_EQ(lp5["token_logprobs"], lp0["token_logprobs"]);
  // The first offset is the prompt's length in characters (11), not bytes (13).
  EXPECT_EQ(lp5["text_offset"][0], 11);
  for (const json& t : lp5["top_logprobs"]) EXPECT_EQ(t.size(), 5u) << t;

  // Streaming carries the same logprobs, token for token.
  five["stream"] = true;
  five.erase("echo");
  httplib::Client c("127.0.0.1", port());
  const auto st = c.Post("/v1/completions", five.dump(), "application/json");
  ASSERT_TRUE(st);
  json streamed_lp = json::array(), streamed_offsets = json::array();
  for (const json& ev : sse_events(st->body)) {
    if (!ev.is_object() || !ev.contains("choices") || ev["choices"].empty()) continue;
    const json& lp = ev["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const json& v : lp["token_logprobs"]) streamed_lp.push_back(v);
    for (const json& v : lp["text_offset"]) streamed_offsets.push_back(v);
  }
  EXPECT_EQ(streamed_lp, lp0["token_logprobs"]);
  ASSERT_EQ(streamed_offsets.size(), 8u);
  EXPECT_EQ(streamed_offsets[0], 0);
}

TEST_F(ServeWire, StreamOptionsIncludeUsageSendsAUsageChunk) {
  const json req = {{"prompt", "usage"},
                    {"max_tokens", 4},
                    {"ignore_eos", true},
                    {"stream", true},
                    {"stream_options", {{"include_usage", true}}}};
  httplib::Client c("127.0.0.1", port());
  const auto r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  const std::vector<json> events = sse_events(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].is_array() && usage["choices"].empty()) << usage;
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  EXPECT_EQ(usage["usage"]["total_tokens"], usage["usage"]["prompt_tokens"].get<int>() + 4);
}

TEST_F(ServeWire, ModelByIdMethodsAndCors) {
  httplib::Client c("127.0.0.1", port());
  const auto list = c.Get("/v1/models");
  ASSERT_TRUE(list);
  const std::string id = json::parse(list->body)["data"][0]["id"];
  const auto one = c.Get(("/v1/models/" + id).c_str());
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(json::parse(one->body)["id"], id);
  const auto none = c.Get("/v1/models/no-such-model");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "model_not_found");

  const auto wrong = c.Get("/v1/completions");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_NE(wrong->get_header_value("Allow").find("POST"), std::string::npos);
  EXPECT_TRUE(json::parse(wrong->body, nullptr, false).contains("error"));

  // Preflight from the allowed origin, then from another one.
  RawConn raw(port());
  ASSERT_TRUE(
      raw.send("OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: " + std::string(kOrigin) +
               "\r\nAccess-Control-Request-Method: POST\r\n"
               "Access-Control-Request-Headers: content-type, authorization\r\n\r\n"));
  RawResponse pre = raw.read_response(10);
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.headers["access-control-allow-origin"], kOrigin);
  EXPECT_NE(pre.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_EQ(pre.headers["access-control-allow-headers"], "content-type, authorization");
  ASSERT_TRUE(
      raw.send("OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://evil"
               "\r\nAccess-Control-Request-Method: POST\r\n\r\n"));
  pre = raw.read_response(10);
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.headers.count("access-control-allow-origin"), 0u);
  // A real request from the allowed origin carries the header.
  ASSERT_TRUE(raw.send(get_request("/health", "Origin: " + std::string(kOrigin) + "\r\n")));
  EXPECT_EQ(raw.read_response(10).headers["access-control-allow-origin"], kOrigin);
}

// Issue 33's smaller items: HEAD on a GET route is the GET head without a body (not a
// 405); a head with bare-LF line ends is a 400 at once (not a 408 after the header
// timeout); a multipart/form-data body (with or without a boundary) is a 415, not JSON.
TEST_F(ServeWire, HeadBareLfAndMultipartAreAnsweredAtOnce) {
  {
    RawConn c(port());
    // HEAD then GET pipelined: if HEAD's answer carried a body, the GET's would not parse.
    ASSERT_TRUE(c.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n" + get_request("/health")));
    RawResponse head = c.read_head_response(10);
    EXPECT_EQ(head.status, 200);
    EXPECT_NE(head.headers["content-length"], "");
    EXPECT_NE(head.headers["content-length"], "0");
    const RawResponse get = c.read_response(10);
    EXPECT_EQ(get.status, 200);
    EXPECT_EQ(json::parse(get.body)["status"], "ok");
    EXPECT_EQ(std::to_string(get.body.size()), head.headers["content-length"]);
  }
  {
    RawConn c(port());
    ASSERT_TRUE(c.send("HEAD /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"));
    RawResponse r = c.read_head_response(10);
    EXPECT_EQ(r.status, 405);  // POST only: HEAD follows GET, not POST
    EXPECT_EQ(r.headers["allow"].find("HEAD"), std::string::npos);
  }
  {
    RawConn c(port());
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}"));
    const RawResponse r = c.read_response(5);  // the header timeout is 10 s
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("bare LF"), std::string::npos) << r.body;
  }
  const std::string body = json{{"prompt", "k"}, {"max_tokens", 1}}.dump();
  for (const std::string type : {"multipart/form-data", "Multipart/Form-Data; boundary=xyz"}) {
    RawConn c(port());
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: " + type +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    const RawResponse r = c.read_response(10);
    EXPECT_EQ(r.status, 415) << type;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "unsupported_media_type") << type;
  }
}

// Defects 6 and 11: many requests per connection, pipelining answered in order.
TEST_F(ServeWire, KeepAliveAndPipelining) {
  RawConn c(port());
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(
        c.send(post_request("/v1/completions", json{{"prompt", "k"}, {"max_tokens", 1}}.dump())));
    const RawResponse r = c.read_response(30);
    ASSERT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.headers.count("connection"), 0u) << "closed after request " << i;
  }
  ASSERT_TRUE(c.send(get_request("/health") + get_request("/v1/models") + get_request("/nope")));
  EXPECT_EQ(json::parse(c.read_response(30).body)["status"], "ok");
  EXPECT_EQ(json::parse(c.read_response(30).body)["object"], "list");
  EXPECT_EQ(c.read_response(30).status, 404);
}

// Defect 2 at the server: chunked bodies count against --max-body-bytes; headers bounded.
TEST_F(ServeWire, ChunkedBodiesAndHeadersAreBounded) {
  {
    RawConn c(port());
    ASSERT_TRUE(
        c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
               "Transfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk = "1000\r\n" + std::string(4096, ' ') + "\r\n";
    for (int i = 0; i < 32 && c.send(chunk); ++i) {
    }
    EXPECT_EQ(c.read_response(10).status, 413);
  }
  {
    RawConn c(port());
    c.send("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
    EXPECT_EQ(c.read_response(10).status, 431);
  }
  {
    RawConn c(port());
    ASSERT_TRUE(
        c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
               "Content-Length: 6\r\n\r\nabcdef"));
    EXPECT_EQ(c.read_response(10).status, 400);
  }
  EXPECT_EQ(complete(port(), {{"prompt", "ok"}, {"max_tokens", 1}}).first, 200);
}

// Defect 10: a non-streamed request whose client leaves is cancelled.
TEST_F(ServeWire, ANonStreamedRequestIsCancelledWhenItsClientLeaves) {
  const std::string cancelled = "detinfer_requests_total{finish_reason=\"cancelled\"}";
  const double before = metric(port(), cancelled);
  {
    RawConn c(port());
    ASSERT_TRUE(c.send(
        post_request("/v1/completions",
                     json{{"prompt", "long"}, {"max_tokens", 2000}, {"ignore_eos", true}}.dump())));
    // Leave once the request is generating (it is counted as running).
    wait_generating(port());
    ASSERT_GT(metric(port(), "detinfer_kv_blocks_in_use"), 0);
  }
  double after = before;
  for (int i = 0; i < 1000 && after <= before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    after = metric(port(), cancelled);
  }
  EXPECT_EQ(after, before + 1);
}

// Defects 3 and 4: slow clients neither block others nor hold shutdown past its timeout;
// a second signal exits at once.
TEST(ServeWireShutdown, SlowClientsDoNotHoldShutdownAndASecondSignalExits) {
  ASSERT_FALSE(tiny_model().empty());
  ServeProcess server;
  ASSERT_TRUE(server.start(tiny_model(),
                           {"--threads", "1", "--http-threads", "2", "--shutdown-timeout", "1"}))
      << server.log();
  std::vector<std::unique_ptr<RawConn>> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(std::make_unique<RawConn>(server.port()));
    slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n{");
  }
  RawConn ok(server.port());
  ASSERT_TRUE(ok.send(get_request("/health")));
  EXPECT_EQ(ok.read_response(10).status, 200);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 10), 0) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));

  ServeProcess stubborn;
  ASSERT_TRUE(stubborn.start(tiny_model(), {"--threads", "1", "--shutdown-timeout", "600"}))
      << stubborn.log();
  std::thread inflight([&] { complete(stubborn.port(), kLongRequest); });
  wait_generating(stubborn.port());
  ::kill(stubborn.pid(), SIGTERM);
  // The first signal waits (up to 600 s) for the request; the second ends it now.
  for (int i = 0; i < 200 && stubborn.log().find("shutting down") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int code = stubborn.signal_and_wait(SIGTERM, 5);
  EXPECT_NE(code, -1) << "still running after the second signal\n" << stubborn.log();
  EXPECT_NE(code, 0);
  inflight.join();
}

// Defect 1 at the server: a tokenizer.json nested 100k levels deep is refused with an
// error when `serve` starts (it used to crash it).
TEST(ServeWireModel, DeeplyNestedTokenizerJsonIsAnErrorNotACrash) {
  ASSERT_FALSE(tiny_model().empty());
  const std::string dir = testing::cli_scratch_dir("deep-tokenizer") + "/model";
  std::filesystem::copy(tiny_model(), dir, std::filesystem::copy_options::recursive);
  {
    std::ofstream tok(dir + "/tokenizer.json", std::ios::trunc);
    tok << "{\"version\": \"1.0\", \"added_tokens\": " << std::string(100000, '[')
        << std::string(100000, ']') << "}";
  }
  ServeProcess server;
  EXPECT_FALSE(server.start(dir, {"--threads", "1"}, 60)) << "served a broken tokenizer";
  const int code = server.signal_and_wait(0, 30);
  EXPECT_GE(code, 1) << server.log();
  EXPECT_LT(code, 128) << "killed by a signal:\n" << server.log();
  EXPECT_NE(server.log().find("tokenizer.json"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace detinfer
