// `detinfer serve`'s chat route against issue 33, on the real program: a tool call whose
// arguments string nests 10^3 ... 10^6 deep gets a 4xx and the server stays up (it once
// died with SIGSEGV at 10^5); SIGTERM after a run of large rejected requests exits
// cleanly; tools and tool-call arguments reach the template in the client's key order,
// the same prompt `detinfer render-template` prints; a conversation too long by its bytes
// is refused before tokenizing; and 64 concurrent 1 MB chat requests keep the server's
// peak RSS bounded and give the memory back.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::ServeProcess;

std::pair<int, std::string> post(int port, const std::string& path, const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(300, 0);
  const httplib::Result r = c.Post(path, body, "application/json");
  if (!r) return {-1, httplib::to_string(r.error())};
  return {r->status, r->body};
}

int health(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  const httplib::Result r = c.Get("/health");
  return r ? r->status : -1;
}

// A chat body whose assistant message calls a tool with `arguments` as a JSON string.
std::string call_body(const std::string& arguments) {
  return R"({"max_tokens": 2, "messages": [{"role": "user", "content": "hi"},)"
         R"({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",)"
         R"("function": {"name": "f", "arguments": )" +
         json(arguments).dump() + "}}]}]}";
}

// VmRSS or VmHWM of a process in KiB (-1 when unreadable).
std::int64_t status_kib(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1);
  }
  return -1;
}

class ChatHostileServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::cli_scratch_dir("chat-hostile"));
    // The real Qwen3 template: it prints tools and object arguments with tojson.
    const std::string tmpl = std::string(DETINFER_JINJA_FIXTURES) + "/templates/qwen3.jinja";
    const testing::ProcessResult r =
        testing::run_shell(testing::cli_path() + " make-tiny-model --arch qwen2 --seed 1 --out '" +
                           *dir_ + "/model' --chat-template '" + tmpl + "'");
    if (r.exit_code == 0) model_ = new std::string(*dir_ + "/model");
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(model_ != nullptr) << "make-tiny-model failed"; }
  static std::string write(const std::string& name, const std::string& text) {
    const std::string path = *dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  static std::string* dir_;
  static std::string* model_;
};
std::string* ChatHostileServe::dir_ = nullptr;
std::string* ChatHostileServe::model_ = nullptr;

TEST_F(ChatHostileServe, DeepToolCallArgumentsAre4xxAndTheServerLives) {
  ServeProcess server;
  ASSERT_TRUE(server.start(*model_, {"--threads", "1"})) << server.log();
  for (const std::size_t depth :
       {std::size_t{1000}, std::size_t{10000}, std::size_t{100000}, std::size_t{1000000}}) {
    const std::string body =
        call_body(std::string(depth, '[') + std::string(depth, ']'));  // 10^5: 200 KB
    const auto [status, text] = post(server.port(), "/v1/chat/completions", body);
    ASSERT_GE(status, 400) << depth << ": " << text.substr(0, 300) << "\n" << server.log();
    ASSERT_LT(status, 500) << depth << ": " << text.substr(0, 300);
    if (body.size() <= (std::size_t{1} << 20)) {  // 10^6 is over the body limit: a 413
      const json j = json::parse(text, nullptr, false);
      EXPECT_EQ(status, 400);
      EXPECT_EQ(j["error"]["param"], "messages[1].tool_calls[0].function.arguments") << text;
    }
    ASSERT_EQ(health(server.port()), 200) << "after depth " << depth << "\n" << server.log();
  }
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 60), 0) << server.log();
}

TEST_F(ChatHostileServe, SigtermAfterLargeRejectedRequestsExitsCleanly) {
  ServeProcess server;
  ASSERT_TRUE(server.start(*model_, {"--threads", "1"})) << server.log();
  const std::string big =
      json{{"messages", json::array({{{"role", "user"}, {"content", std::string(900000, 'a')}}})}}
          .dump();
  std::vector<std::future<int>> done;
  for (int i = 0; i < 8; ++i) {
    done.push_back(std::async(std::launch::async, [&] {
      return post(server.port(), "/v1/chat/completions", big).first;
    }));
  }
  for (auto& f : done) EXPECT_EQ(f.get(), 400);
  EXPECT_EQ(post(server.port(), "/v1/chat/completions", call_body(std::string(100000, '['))).first,
            400);
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 60), 0) << server.log();
}

// A conversation too long for the context by its rendered bytes alone is a 400 naming
// "messages" before it is tokenized (the message gives the byte bound, docs/server.md).
TEST_F(ChatHostileServe, AConversationTooLongByItsBytesIsA400BeforeTokenizing) {
  ServeProcess server;
  ASSERT_TRUE(server.start(*model_, {"--threads", "1"})) << server.log();
  const std::string big =
      json{{"messages", json::array({{{"role", "user"}, {"content", std::string(500000, 'a')}}})}}
          .dump();
  const auto [status, text] = post(server.port(), "/v1/chat/completions", big);
  EXPECT_EQ(status, 400) << text.substr(0, 300);
  const json j = json::parse(text, nullptr, false);
  EXPECT_EQ(j["error"]["param"], "messages") << text.substr(0, 300);
  EXPECT_NE(text.find("bytes of prompt text"), std::string::npos) << text.substr(0, 300);
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 60), 0) << server.log();
}

TEST_F(ChatHostileServe, ToolsAndArgumentsKeepTheClientsKeyOrderLikeRenderTemplate) {
  // Keys in non-alphabetical order everywhere a client's JSON reaches the template.
  const std::string request =
      R"({"messages": [{"role": "user", "content": "Weather?"},)"
      R"({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",)"
      R"("function": {"name": "get_weather", "arguments": {"zcity": "Bern", "aunit": "C"}}},)"
      R"({"id": "c2", "type": "function", "function": {"name": "get_weather",)"
      R"("arguments": "{\"zcity\": \"Genf\", \"aunit\": \"F\"}"}}]},)"
      R"({"role": "tool", "content": "21", "tool_call_id": "c1"}],)"
      R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters":)"
      R"({"type": "object", "required": ["zcity"], "properties": {"zcity": {"type": "string"},)"
      R"("aunit": {"type": "string"}}}}}]})";
  const testing::ProcessResult rendered =
      testing::run_shell(testing::cli_path() + " render-template --model '" + *model_ +
                         "' --messages '" + write("request.json", request) + "'");
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  ASSERT_NE(rendered.out.find(R"({"zcity": "Bern", "aunit": "C"})"), std::string::npos)
      << rendered.out;
  ASSERT_NE(rendered.out.find(R"("required": ["zcity"], "properties": {"zcity")"),
            std::string::npos)
      << rendered.out;

  ServeProcess server;
  ASSERT_TRUE(server.start(*model_, {"--threads", "1"})) << server.log();
  json chat = json::parse(request);
  chat["max_tokens"] = 3;
  chat["temperature"] = 0;
  // The server's body is the request's text, so its key order is the client's.
  std::string chat_text = request;
  chat_text.insert(1, R"("max_tokens": 3, "temperature": 0, )");
  const auto [cs, cbody] = post(server.port(), "/v1/chat/completions", chat_text);
  ASSERT_EQ(cs, 200) << cbody;
  // The same prompt text through completions: equal prompt tokens and digests.
  const json completion = {{"prompt", rendered.out}, {"max_tokens", 3}, {"temperature", 0}};
  const auto [ps, pbody] = post(server.port(), "/v1/completions", completion.dump());
  ASSERT_EQ(ps, 200) << pbody;
  const json c = json::parse(cbody);
  const json p = json::parse(pbody);
  EXPECT_EQ(c["usage"]["prompt_tokens"], p["usage"]["prompt_tokens"]);
  EXPECT_EQ(c["detinfer"]["digest"], p["detinfer"]["digest"]);
  // The control: the same body with sorted keys (what nlohmann::json makes of it) is a
  // different prompt, so the comparison above can fail.
  const auto [ss, sbody] = post(server.port(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(ss, 200) << sbody;
  EXPECT_NE(json::parse(sbody)["detinfer"]["digest"], c["detinfer"]["digest"]);
}

// 64 concurrent chat requests of ~1 MB each (too long for the tiny model's context: 400).
// Before issue 33's fixes this server peaked at 1.9 GB and kept 1.4 GB (7.9x idle)
// afterwards on the same machine; the bounds below are what the budget and the heap
// release guarantee: the peak grows by under 1 GiB (measured: 652 MiB), and RSS comes back within
// 10% of idle (issue 33's target).
TEST_F(ChatHostileServe, ConcurrentLargeChatRequestsKeepMemoryBounded) {
  ServeProcess server;
  ASSERT_TRUE(server.start(*model_, {"--threads", "1"})) << server.log();
  const std::string small = R"({"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})";
  const std::string big =
      json{{"messages", json::array({{{"role", "user"}, {"content", std::string(1000000, 'a')}}})}}
          .dump();
  // Idle: after a round of 64 concurrent small requests (threads and arenas exist) and
  // one large request alone.
  const auto round = [&](const std::string& body) {
    std::vector<std::future<int>> done;
    for (int i = 0; i < 64; ++i) {
      done.push_back(std::async(std::launch::async, [&] {
        return post(server.port(), "/v1/chat/completions", body).first;
      }));
    }
    std::vector<int> statuses;
    for (auto& f : done) statuses.push_back(f.get());
    return statuses;
  };
  for (const int s : round(small)) ASSERT_EQ(s, 200);
  ASSERT_EQ(post(server.port(), "/v1/chat/completions", big).first, 400);
  const std::int64_t idle = status_kib(server.pid(), "VmRSS");
  const std::int64_t idle_peak = status_kib(server.pid(), "VmHWM");
  ASSERT_GT(idle, 0);
  for (const int s : round(big)) {
    // 400 (too long), or 408 when this shared machine cannot read 64 MB of bodies in time.
    EXPECT_TRUE(s == 400 || s == 408) << s;
  }
  const std::int64_t peak = status_kib(server.pid(), "VmHWM");
  // Each large request gives the free heap back when its budget lease ends (malloc_trim),
  // but the round's handlers free their 1 MB bodies after answering, so the last trim can
  // come before the last frees. A lone large request, as when `idle` was read, trims again
  // once the round's handlers are done: the comparison is then like for like. Without the
  // heap release RSS stays many times idle whatever comes after (7.9x before issue 33).
  std::int64_t after = status_kib(server.pid(), "VmRSS");
  // The bound: issue 33's 10% above idle. Measured on the 2-core host with other builds
  // running (load 4-9), 40 runs: RSS after the burst was within -1.5%..+3% of idle (before
  // the heap release: 7.9x idle; an earlier tree, before the sampling workspace and the early
  // size rejection, reached 10.2% once).
  const std::int64_t bound = idle + idle / 10;
  for (int i = 0; i < 8 && after > bound; ++i) {
    ASSERT_EQ(post(server.port(), "/v1/chat/completions", big).first, 400);
    after = status_kib(server.pid(), "VmRSS");
  }
  std::printf("idle RSS %lld KiB (peak %lld), after 64 x 1 MB: peak %lld KiB, RSS %lld KiB\n",
              static_cast<long long>(idle), static_cast<long long>(idle_peak),
              static_cast<long long>(peak), static_cast<long long>(after));
  EXPECT_LT(peak - idle, std::int64_t{1} << 20);  // KiB: 1 GiB
  EXPECT_LE(after, bound);
  EXPECT_EQ(health(server.port()), 200);
}

}  // namespace
}  // namespace detinfer
