// Tool calls on `detinfer serve`'s /v1/chat/completions (docs/tools.md), over HTTP on tiny
// random models with real chat templates (tests/jinja/fixtures: Qwen 2.5 speaks the
// Hermes <tool_call> syntax, Llama 3.1 the JSON one) and minimal ones in the shape of Mistral's
// (array and [ARGS] forms) and of a Llama 3.2 pythonic system prompt: tool_choice
// "required" and a named function force a call whose arguments follow the function's parameters
// schema, the answer is the same on every run (ids included), streamed tool-call deltas equal the
// whole answer, concurrent clients get what they get alone, the call round-trips through the
// template, and bad tool parameters are 400s naming the parameter.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli/cli_test_support.h"
#include "cli/http_json.h"
#include "cli/tool_call_checks.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::ServeProcess;
using testing::sse_events;

std::pair<int, std::string> post(int port, const json& body) {
  return testing::post(port, "/v1/chat/completions", body);
}

const json kWeather = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "The weather of a city"},
      {"parameters",
       {{"type", "object"},
        {"properties",
         {{"city", {{"type", "string"}, {"maxLength", 8}}}, {"days", {{"type", "integer"}}}}},
        {"required", {"city", "days"}},
        {"additionalProperties", false}}}}}};
const json kTime = {{"type", "function"},
                    {"function",
                     {{"name", "get_time"},
                      {"parameters",
                       {{"type", "object"},
                        {"properties", {{"tz", {{"enum", {"UTC", "CET"}}}}}},
                        {"required", {"tz"}},
                        {"additionalProperties", false}}}}}};

json request(const json& tool_choice) {
  return {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Bern?"}}})},
          {"tools", json::array({kWeather, kTime})},
          {"tool_choice", tool_choice},
          {"max_tokens", 60},
          {"temperature", 0.8},
          {"seed", 11}};
}

// The arguments of a call validated by hand against the two schemas above.
void expect_valid_arguments(const json& call) { testing::expect_valid_tool_call(call); }

class ToolServe : public ::testing::Test {
 protected:
  static std::string fixture(const std::string& name) {
    return std::string(DETINFER_SOURCE_DIR) + "/tests/jinja/fixtures/templates/" + name;
  }
  static ServeProcess* start(const std::string& name, const std::string& templ) {
    const std::string dir = testing::cli_scratch_dir(name);
    const auto r = testing::run_shell(testing::cli_path() +
                                      " make-tiny-model --arch qwen2 --seed 1 --max-positions 8192 "
                                      "--chat-template '" +
                                      templ + "' --out '" + dir + "'");
    if (r.exit_code != 0) return nullptr;
    auto* s = new ServeProcess();
    if (!s->start(dir, {"--threads", "1"})) {
      delete s;
      return nullptr;
    }
    return s;
  }
  static void SetUpTestSuite() {
    hermes_ = start("tools-qwen", fixture("qwen2_5.jinja"));
    llama_ = start("tools-llama", fixture("llama3_1.jinja"));
    // No Mistral template with tools is among the fixtures: a minimal one in the shape of
    // Mistral's v3 templates ([AVAILABLE_TOOLS], [INST], [TOOL_CALLS], [TOOL_RESULTS]).
    const std::string mistral = testing::cli_scratch_dir("tools-mistral-template") + "/t.jinja";
    std::ofstream(mistral)
        << "{%- if tools %}[AVAILABLE_TOOLS] {{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
           "{%- for m in messages %}{%- if m.role == 'user' %}[INST] {{ m.content }}[/INST]"
           "{%- elif m.role == 'assistant' and m.tool_calls %}[TOOL_CALLS] ["
           "{%- for c in m.tool_calls %}{{ c.function | tojson }}{% if not loop.last %}, "
           "{% endif %}{% endfor %}]</s>"
           "{%- elif m.role == 'assistant' %}{{ m.content }}</s>"
           "{%- elif m.role == 'tool' %}[TOOL_RESULTS] {{ m.content }}[/TOOL_RESULTS]"
           "{%- endif %}{%- endfor %}";
    mistral_ = start("tools-mistral", mistral);
    // Mistral tokenizer v11+ writes [TOOL_CALLS]name[ARGS]{..}. The real models are told by
    // their [ARGS] token; the tiny tokenizer has none, so the instruction names the form.
    const std::string args = testing::cli_scratch_dir("tools-mistral-args-template") + "/t.jinja";
    std::ofstream(args)
        << "{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]"
           "Call a tool as [TOOL_CALLS]name[ARGS]{arguments}.{% endif %}"
           "{%- for m in messages %}{%- if m.role == 'user' %}[INST]{{ m.content }}[/INST]"
           "{%- elif m.role == 'assistant' and m.tool_calls %}{%- for c in m.tool_calls %}"
           "[TOOL_CALLS]{{ c.function.name }}[ARGS]{{ c.function.arguments | tojson }}"
           "{%- endfor %}</s>"
           "{%- elif m.role == 'assistant' %}{{ m.content }}</s>"
           "{%- elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]"
           "{%- endif %}{%- endfor %}";
    mistral_args_ = start("tools-mistral-args", args);
    // Llama 3.2's pythonic tool prompt: calls as [f(k=v, ...)].
    const std::string py = testing::cli_scratch_dir("tools-pythonic-template") + "/t.jinja";
    std::ofstream(py)
        << "{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\nIf you call a function,"
           " you MUST put it in the format of [func_name1(params_name1=params_value1, "
           "params_name2=params_value2...), func_name2(params)]\n{{ tools | tojson }}<|eot_id|>"
           "{%- endif %}{%- for m in messages %}<|start_header_id|>"
           "{{ 'ipython' if m.role == 'tool' else m.role }}<|end_header_id|>\n\n"
           "{%- if m.tool_calls %}[{%- for c in m.tool_calls %}{{ c.function.name }}("
           "{%- for k, v in c.function.arguments.items() %}{{ k }}={{ v | tojson }}"
           "{%- if not loop.last %}, {% endif %}{%- endfor %})"
           "{%- if not loop.last %}, {% endif %}{%- endfor %}]"
           "{%- else %}{{ m.content }}{%- endif %}<|eot_id|>{%- endfor %}"
           "<|start_header_id|>assistant<|end_header_id|>\n\n";
    pythonic_ = start("tools-pythonic", py);
  }
  static void TearDownTestSuite() {
    for (ServeProcess** s : {&hermes_, &llama_, &mistral_, &mistral_args_, &pythonic_}) {
      if (*s != nullptr) (*s)->signal_and_wait(SIGTERM, 20);
      delete *s;
      *s = nullptr;
    }
  }
  void SetUp() override {
    ASSERT_TRUE(hermes_ != nullptr && llama_ != nullptr && mistral_ != nullptr &&
                mistral_args_ != nullptr && pythonic_ != nullptr)
        << "detinfer serve did not start";
  }
  static std::vector<ServeProcess*> servers() {
    return {hermes_, llama_, mistral_, mistral_args_, pythonic_};
  }
  static std::string format_of(const ServeProcess* s) {
    if (s == mistral_args_) return "mistral_args";
    if (s == pythonic_) return "pythonic";
    return s == hermes_ ? "hermes" : s == llama_ ? "llama3_json" : "mistral";
  }
  static ServeProcess* hermes_;
  static ServeProcess* llama_;
  static ServeProcess* mistral_;
  static ServeProcess* mistral_args_;
  static ServeProcess* pythonic_;
};
ServeProcess* ToolServe::hermes_ = nullptr;
ServeProcess* ToolServe::llama_ = nullptr;
ServeProcess* ToolServe::mistral_ = nullptr;
ServeProcess* ToolServe::mistral_args_ = nullptr;
ServeProcess* ToolServe::pythonic_ = nullptr;

TEST_F(ToolServe, RequiredForcesAValidCallTheSameOnEveryRun) {
  for (ServeProcess* server : servers()) {
    const auto [status, body] = post(server->port(), request("required"));
    ASSERT_EQ(status, 200) << body;
    const json j = json::parse(body);
    EXPECT_EQ(j["detinfer"]["tool_call_format"], format_of(server));
    const json& choice = j["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << body;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << body;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << body;
    expect_valid_arguments(choice["message"]["tool_calls"][0]);
    const auto [again_status, again] = post(server->port(), request("required"));
    ASSERT_EQ(again_status, 200) << again;
    EXPECT_EQ(json::parse(again)["choices"], j["choices"]);  // ids, names, arguments
  }
}

TEST_F(ToolServe, NamedFunctionIsCalledOverSeveralSeeds) {
  std::set<std::string> arguments;
  for (const std::string name : {"get_weather", "get_time"}) {
    for (std::int64_t seed = 1; seed <= 3; ++seed) {
      json r = request({{"type", "function"}, {"function", {{"name", name}}}});
      r["seed"] = seed;
      const auto [status, body] = post(hermes_->port(), r);
      ASSERT_EQ(status, 200) << body;
      const json answer = json::parse(body);
      const json& choice = answer["choices"][0];
      EXPECT_EQ(choice["finish_reason"], "tool_calls") << body;
      ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << body;
      EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], name);
      expect_valid_arguments(choice["message"]["tool_calls"][0]);
      arguments.insert(
          choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    }
  }
  EXPECT_GT(arguments.size(), 2u);  // the arguments are generated, not fixed
}

// Forced calls from 40 concurrent clients (five templates, required and named, 4 seeds)
// equal the same requests sent alone: calls, ids and digests.
TEST_F(ToolServe, ConcurrentCallsEqualTheRequestAlone) {
  std::vector<std::pair<ServeProcess*, json>> requests;
  for (ServeProcess* server : servers()) {
    for (std::int64_t seed = 20; seed < 24; ++seed) {
      for (const json& choice :
           {json("required"),
            json({{"type", "function"}, {"function", {{"name", "get_weather"}}}})}) {
        json r = request(choice);
        r["seed"] = seed;
        requests.emplace_back(server, r);
      }
    }
  }
  const auto answer = [](const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    return j.is_object() ? json::array({j["choices"], j["detinfer"]["digest"]}) : json();
  };
  std::vector<json> alone;
  for (const auto& [server, r] : requests) {
    const auto [status, body] = post(server->port(), r);
    ASSERT_EQ(status, 200) << body;
    alone.push_back(answer(body));
    ASSERT_EQ(alone.back()[0][0]["finish_reason"], "tool_calls") << body;
  }
  std::vector<std::string> together(requests.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back(
        [&, i] { together[i] = post(requests[i].first->port(), requests[i].second).second; });
  }
  for (std::thread& t : clients) t.join();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(answer(together[i]), alone[i]) << requests[i].second;
  }
}

// The streamed deltas (OpenAI's delta.tool_calls[] with index, id, type and function) put
// together equal the whole answer's message.
TEST_F(ToolServe, StreamedToolCallDeltasEqualTheWholeAnswer) {
  const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  for (ServeProcess* server : servers()) {
    for (const json& choice : {json("required"), named, json("auto")}) {
      json r = request(choice);
      r["max_tokens"] = choice == "auto" ? 12 : 60;
      const auto [ws, whole_body] = post(server->port(), r);
      ASSERT_EQ(ws, 200) << whole_body;
      const json whole = json::parse(whole_body)["choices"][0];
      r["stream"] = true;
      const auto [ss, streamed] = post(server->port(), r);
      ASSERT_EQ(ss, 200) << streamed;
      json calls = json::array();
      std::string content, finish;
      for (const json& e : sse_events(streamed)) {
        if (e == "[DONE]") continue;
        ASSERT_TRUE(e.is_object()) << streamed;
        if (e["choices"].empty()) continue;
        const json& c = e["choices"][0];
        if (c["finish_reason"].is_string()) finish = c["finish_reason"];
        content += c["delta"].value("content", std::string());
        if (!c["delta"].contains("tool_calls")) continue;
        for (const json& d : c["delta"]["tool_calls"]) {
          const std::size_t k = d["index"].get<std::size_t>();
          if (calls.size() <= k) {
            calls.push_back({{"type", "function"}, {"function", json::object()}});
          }
          if (d.contains("id")) calls[k]["id"] = d["id"];
          calls[k]["function"]["name"] = d["function"]["name"];
          calls[k]["function"]["arguments"] =
              calls[k]["function"].value("arguments", std::string()) +
              d["function"]["arguments"].get<std::string>();
        }
      }
      EXPECT_EQ(finish, whole["finish_reason"]) << streamed;
      if (choice != "auto") {
        EXPECT_EQ(finish, "tool_calls") << streamed;
      }
      EXPECT_EQ(calls, whole["message"].value("tool_calls", json::array())) << streamed;
      EXPECT_EQ(content, whole["message"]["content"].is_null()
                             ? std::string()
                             : whole["message"]["content"].get<std::string>())
          << streamed;
    }
  }
}

// A call, its result and a second forced call with the same seed: the conversation
// renders through both templates and the second turn's call id is a new one.
TEST_F(ToolServe, ACallAndItsResultRoundTripThroughTheTemplate) {
  for (ServeProcess* server : servers()) {
    json r = request("required");
    const auto [s1, b1] = post(server->port(), r);
    ASSERT_EQ(s1, 200) << b1;
    json message = json::parse(b1)["choices"][0]["message"];
    r["messages"].push_back(message);
    r["messages"].push_back(
        {{"role", "tool"}, {"tool_call_id", message["tool_calls"][0]["id"]}, {"content", "21 C"}});
    const auto [s2, b2] = post(server->port(), r);  // the same seed, the next turn
    ASSERT_EQ(s2, 200) << b2;
    const json second = json::parse(b2);
    EXPECT_GT(second["usage"]["prompt_tokens"].get<int>(),
              json::parse(b1)["usage"]["prompt_tokens"].get<int>());
    ASSERT_EQ(second["choices"][0]["finish_reason"], "tool_calls") << b2;
    EXPECT_NE(second["choices"][0]["message"]["tool_calls"][0]["id"],
              message["tool_calls"][0]["id"]);  // the turns' ids differ
  }
}

// tool_choice "none": the template sees no tools and nothing is parsed, so the answer is
// the one of the same request without tools.
TEST_F(ToolServe, NoneIsTheRequestWithoutTools) {
  const auto [s1, b1] = post(hermes_->port(), request("none"));
  json plain = request("none");
  plain.erase("tools");
  plain.erase("tool_choice");
  const auto [s2, b2] = post(hermes_->port(), plain);
  ASSERT_EQ(s1, 200) << b1;
  ASSERT_EQ(s2, 200) << b2;
  EXPECT_EQ(json::parse(b1)["detinfer"]["digest"], json::parse(b2)["detinfer"]["digest"]);
  EXPECT_FALSE(json::parse(b1)["detinfer"].contains("tool_call_format"));
}

// "required" among n functions is one anyOf branch per function: 16 are generated, 17 are
// a 400 naming tools (structured outputs' limit of 16 live branches).
TEST_F(ToolServe, RequiredAmongAtMost16Functions) {
  for (const int n : {16, 17}) {
    json tools = json::array();
    for (int i = 0; i < n; ++i) {
      const std::string arg = "x" + std::to_string(i);
      tools.push_back({{"type", "function"},
                       {"function",
                        {{"name", "f" + std::to_string(i)},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{arg, {{"type", "integer"}}}}},
                           {"required", {arg}}}}}}});
    }
    json r = request("required");
    r["tools"] = tools;
    const auto [status, body] = post(mistral_->port(), r);
    if (n == 16) {
      ASSERT_EQ(status, 200) << body;
      const json j = json::parse(body);
      EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << body;
      const json call = j["choices"][0]["message"]["tool_calls"][0]["function"];
      const std::string index = call["name"].get<std::string>().substr(1);
      EXPECT_TRUE(
          json::parse(call["arguments"].get<std::string>())["x" + index].is_number_integer())
          << body;
    } else {
      EXPECT_EQ(status, 400) << body;
      EXPECT_EQ(json::parse(body, nullptr, false)["error"]["param"], "tools") << body;
    }
  }
}

TEST_F(ToolServe, BadToolParametersAre400sNamingTheParam) {
  const auto with = [](const char* key, const json& v) {
    json r = request("auto");
    r[key] = v;
    return r;
  };
  json nameless = kWeather;
  nameless["function"].erase("name");
  json string_params = kWeather;
  string_params["function"]["parameters"] = {{"type", "string"}};
  json minimum = kWeather;
  minimum["function"]["parameters"]["properties"]["days"]["multipleOf"] = 2;
  json both = request("required");
  both["response_format"] = {{"type", "json_object"}};
  json forced_bad = request("required");
  forced_bad["tools"] = json::array({minimum});
  const std::vector<std::pair<json, std::string>> cases = {
      {with("tools", "get_weather"), "tools"},
      {with("tools", json::array({nameless})), "tools"},
      {with("tools", json::array({string_params})), "tools"},
      {with("tools", json::array({kWeather, kWeather})), "tools"},
      {with("tools", json::array({{{"type", "retrieval"}}})), "tools"},
      {with("tool_choice", "sometimes"), "tool_choice"},
      {with("tool_choice", {{"type", "function"}, {"function", {{"name", "get_date"}}}}),
       "tool_choice"},
      {with("parallel_tool_calls", "yes"), "parallel_tool_calls"},
      {both, "tool_choice"},
      // A parameters schema outside the constrained subset, when a call is forced.
      {forced_bad, "tools"}};
  for (const auto& [req, param] : cases) {
    const auto [status, body] = post(hermes_->port(), req);
    EXPECT_EQ(status, 400) << req << " -> " << body;
    EXPECT_EQ(json::parse(body, nullptr, false)["error"]["param"], param) << req << " -> " << body;
  }
  const auto [status, body] = post(hermes_->port(), request("auto"));
  EXPECT_EQ(status, 200) << body;  // still serving
}

}  // namespace
}  // namespace detinfer
