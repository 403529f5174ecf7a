// Tool calls in generated text (src/chat/tool_calls.h): each syntax, several calls,
// malformed JSON staying content, nested braces and tags inside strings, detection from
// templates and vocabularies, the forced-call text and deterministic ids.
#include "chat/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace detinfer::chat {
namespace {

using nlohmann::json;

constexpr ToolCallFormat kAllFormats[] = {ToolCallFormat::kHermes, ToolCallFormat::kLlama3,
                                          ToolCallFormat::kMistral, ToolCallFormat::kMistralArgs,
                                          ToolCallFormat::kPythonic};

TEST(ToolCallParser, HermesSeveralCallsAndContent) {
  const ParsedMessage m = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>{\"name\":\"get_time\",\"arguments\":"
      "{}}</tool_call>",
      ToolCallFormat::kHermes);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].name, "get_weather");
  EXPECT_EQ(m.calls[0].arguments, R"({"city":"Paris","days":2})");  // the model's key order
  EXPECT_EQ(m.calls[1].name, "get_time");
  EXPECT_EQ(m.calls[1].arguments, "{}");
  ASSERT_TRUE(m.content.has_value());
  EXPECT_EQ(*m.content, "Let me check.\n\n");
}

TEST(ToolCallParser, HermesOnlyCallsLeaveNoContent) {
  const ParsedMessage m = parse_tool_calls(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": {}}]}}\n</tool_call>\n",
      ToolCallFormat::kHermes);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].arguments, R"({"a":[1,{"b":{}}]})");  // nested braces
  EXPECT_FALSE(m.content.has_value());
}

TEST(ToolCallParser, HermesTagsAndBracesInsideStrings) {
  const std::string text =
      "<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"a } b </tool_call> "
      "<tool_call> \\\" {\"}}</tool_call>";
  const ParsedMessage m = parse_tool_calls(text, ToolCallFormat::kHermes);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(json::parse(m.calls[0].arguments)["text"], "a } b </tool_call> <tool_call> \" {");
  EXPECT_FALSE(m.content.has_value());
}

TEST(ToolCallParser, HermesMalformedCallsStayContent) {
  for (const std::string text : {
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call>",  // bad JSON
           "<tool_call>{\"arguments\": {}}</tool_call>",                          // no name
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",        // not an object
           "<tool_call>{\"name\": 3}</tool_call>",
           "<tool_call>{\"name\": \"f\"} trailing</tool_call>",
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}",  // cut mid-object
           "I would use <tool_call> here",
       }) {
    const ParsedMessage m = parse_tool_calls(text, ToolCallFormat::kHermes);
    EXPECT_TRUE(m.calls.empty()) << text;
    ASSERT_TRUE(m.content.has_value()) << text;
    EXPECT_EQ(*m.content, text);
  }
  // A malformed call beside a good one: the good one is taken, the bad one kept as text.
  const ParsedMessage m =
      parse_tool_calls("<tool_call>{bad}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>",
                       ToolCallFormat::kHermes);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].name, "g");
  EXPECT_EQ(m.calls[0].arguments, "{}");
  EXPECT_EQ(*m.content, "<tool_call>{bad}</tool_call>");
}

TEST(ToolCallParser, HermesUnclosedCallAtTheEnd) {
  const ParsedMessage m = parse_tool_calls(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"y\"}}\n", ToolCallFormat::kHermes);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].arguments, R"({"x":"y"})");
}

TEST(ToolCallParser, Llama3WholeMessage) {
  for (const std::string text : {
           "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
           "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
           "  \n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n",
       }) {
    const ParsedMessage m = parse_tool_calls(text, ToolCallFormat::kLlama3);
    ASSERT_EQ(m.calls.size(), 1u) << text;
    EXPECT_EQ(m.calls[0].name, "get_weather");
    EXPECT_EQ(m.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_FALSE(m.content.has_value());
  }
  const ParsedMessage two = parse_tool_calls(
      "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": \"}\"}}",
      ToolCallFormat::kLlama3);
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[1].arguments, R"({"k":"}"})");
}

TEST(ToolCallParser, Llama3TextIsContent) {
  for (const std::string text : {
           "The weather is {\"name\": \"x\"}",  // JSON not at the start
           "{\"name\": \"x\", \"parameters\": {}} and more text",
           "{\"name\": \"x\", \"parameters\": {\"a\": 1}",  // cut
           "{\"city\": \"Oslo\"}",                          // no name
           "Plain answer.",
       }) {
    const ParsedMessage m = parse_tool_calls(text, ToolCallFormat::kLlama3);
    EXPECT_TRUE(m.calls.empty()) << text;
    EXPECT_EQ(m.content.value_or("<none>"), text);
  }
}

TEST(ToolCallParser, MistralArrayAfterTheTag) {
  const ParsedMessage m = parse_tool_calls(
      "Sure. [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"q\": \"[x]\"}}, {\"name\": \"b\", "
      "\"arguments\": {}}]",
      ToolCallFormat::kMistral);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].arguments, R"({"q":"[x]"})");
  EXPECT_EQ(m.calls[1].name, "b");
  EXPECT_EQ(m.content.value_or(""), "Sure. ");
  const ParsedMessage bad =
      parse_tool_calls("[TOOL_CALLS] [{\"name\": \"a\"}, {\"nom\": 1}]", ToolCallFormat::kMistral);
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content.value_or(""), "[TOOL_CALLS] [{\"name\": \"a\"}, {\"nom\": 1}]");
  EXPECT_TRUE(parse_tool_calls("no calls", ToolCallFormat::kMistral).calls.empty());
  // Decoded without special tokens, the tag is gone: a bare array of calls is the calls,
  // and only when it is the whole message.
  const ParsedMessage bare = parse_tool_calls(" [{\"name\": \"a\", \"arguments\": {\"k\": 1}}]\n",
                                              ToolCallFormat::kMistral);
  ASSERT_EQ(bare.calls.size(), 1u);
  EXPECT_EQ(bare.calls[0].arguments, R"({"k":1})");
  EXPECT_FALSE(bare.content.has_value());
  for (const std::string text : {"[{\"name\": \"a\"}] and text", "See [1] and [2]", "[1, 2]"}) {
    const ParsedMessage m = parse_tool_calls(text, ToolCallFormat::kMistral);
    EXPECT_TRUE(m.calls.empty()) << text;
    EXPECT_EQ(m.content.value_or(""), text);
  }
}

TEST(ToolCallParser, HostileTextNeverThrows) {
  std::string deep = "<tool_call>";
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  std::string deep_closed = deep;
  for (int i = 0; i < 100000; ++i) deep_closed += "1}";
  for (const ToolCallFormat f : kAllFormats) {
    for (const std::string& text :
         {deep, deep_closed, std::string("\xff\xfe<tool_call>{\"name\":\"\xc3\"}</tool_call>"),
          std::string("[TOOL_CALLS]"), std::string("<tool_call>"), std::string()}) {
      ParsedMessage m;
      EXPECT_NO_THROW(m = parse_tool_calls(text, f));
      EXPECT_TRUE(m.calls.empty());
    }
  }
}

// The fixture templates of tests/jinja (real models' templates) and tokens.
std::string fixture(const std::string& name) {
  std::ifstream in(std::string(DETINFER_SOURCE_DIR) + "/tests/jinja/fixtures/templates/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ToolCallParser, ContentPrefixOfAPartialMessage) {
  const auto hermes = [](std::string_view t) {
    return content_prefix_length(t, ToolCallFormat::kHermes);
  };
  EXPECT_EQ(hermes("Hello"), 5u);
  EXPECT_EQ(hermes("Hello <tool"), 6u);
  EXPECT_EQ(hermes("Hello <tool_call>{\"name\""), 6u);
  EXPECT_EQ(hermes("a <b> c"), 7u);
  EXPECT_EQ(hermes(" \n<tool_call>"), 0u);  // only whitespace so far
  EXPECT_EQ(hermes("<"), 0u);
  EXPECT_EQ(content_prefix_length("x [TOOL", ToolCallFormat::kMistral), 2u);
  EXPECT_EQ(content_prefix_length("x [TOOL_CALLS] [", ToolCallFormat::kMistral), 2u);
  EXPECT_EQ(content_prefix_length(" [{\"name", ToolCallFormat::kMistral), 0u);
  const auto llama = [](std::string_view t) {
    return content_prefix_length(t, ToolCallFormat::kLlama3);
  };
  EXPECT_EQ(llama(" {\"name\""), 0u);
  EXPECT_EQ(llama("<|pyth"), 0u);
  EXPECT_EQ(llama("<b>"), 3u);
  EXPECT_EQ(llama("  "), 0u);
  EXPECT_EQ(llama("Hi {"), 4u);
  // What was sent is where the parsed content starts.
  const std::string text = "Sure: <tool_call>{\"name\": \"f\"}</tool_call> done";
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    const std::size_t n = hermes(std::string_view(text).substr(0, cut));
    EXPECT_EQ(parse_tool_calls(text, ToolCallFormat::kHermes).content->substr(0, n),
              text.substr(0, n));
  }
}

TEST(ToolCallFormatDetection, MarkersAndTokens) {
  const auto none = [](std::string_view) { return false; };
  EXPECT_EQ(detect_tool_call_format(fixture("qwen2_5.jinja"), none), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format(fixture("qwen3.jinja"), none), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format(fixture("llama3_1.jinja"), none), ToolCallFormat::kLlama3);
  EXPECT_EQ(detect_tool_call_format("[AVAILABLE_TOOLS] [...] [/AVAILABLE_TOOLS]", none),
            ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format("plain", none), ToolCallFormat::kHermes);
  const auto mistral_vocab = [](std::string_view t) { return t == "[TOOL_CALLS]"; };
  EXPECT_EQ(detect_tool_call_format("plain", mistral_vocab), ToolCallFormat::kMistral);
  const auto llama_vocab = [](std::string_view t) { return t == "<|python_tag|>"; };
  EXPECT_EQ(detect_tool_call_format("plain", llama_vocab), ToolCallFormat::kLlama3);
  EXPECT_STREQ(to_string(ToolCallFormat::kLlama3), "llama3_json");
}

TEST(ForcedToolCall, PrefixPlusArgumentsPlusSuffixParsesToTheCall) {
  const std::string args = R"({"city": "Paris \"}\" </tool_call>"})";
  for (const ToolCallFormat f : kAllFormats) {
    const ForcedCall named = forced_call(f, std::string("get_\"weather"));
    const ParsedMessage m = parse_tool_calls(named.prefix + args + named.suffix, f);
    ASSERT_EQ(m.calls.size(), 1u) << to_string(f);
    EXPECT_EQ(m.calls[0].name, "get_\"weather");
    EXPECT_EQ(json::parse(m.calls[0].arguments), json::parse(args));
    EXPECT_FALSE(m.content.has_value());
    // The model chooses: the generated text is the call object.
    const ForcedCall open = forced_call(f, std::nullopt);
    const bool params = f == ToolCallFormat::kLlama3 || f == ToolCallFormat::kPythonic;
    const std::string object = params ? R"({"name": "g", "parameters": {"n": 1}})"
                                      : R"({"arguments": {"n": 1}, "name": "g"})";
    const ParsedMessage o = parse_tool_calls(open.prefix + object + open.suffix, f);
    ASSERT_EQ(o.calls.size(), 1u) << to_string(f);
    EXPECT_EQ(o.calls[0].name, "g");
    EXPECT_EQ(o.calls[0].arguments, R"({"n":1})");
  }
  EXPECT_EQ(forced_call(ToolCallFormat::kHermes, std::string("f")).prefix,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
}

TEST(ForcedToolCall, CallObjectSchemaIsJson) {
  const json s =
      json::parse(call_object_schema(ToolCallFormat::kLlama3, "f\"x", R"({"type":"object"})"));
  EXPECT_EQ(s["properties"]["name"]["const"], "f\"x");
  EXPECT_EQ(s["properties"]["parameters"]["type"], "object");
  EXPECT_EQ(s["required"], json({"name", "parameters"}));
  EXPECT_EQ(s["additionalProperties"], false);
}

TEST(ToolCallIds, DeterministicAndDistinct) {
  EXPECT_EQ(tool_call_id(7, 9, 0, 0), tool_call_id(7, 9, 0, 0));
  std::set<std::string> ids;
  for (std::uint64_t seed : {0ull, 7ull}) {
    for (std::uint64_t context : {0ull, 1ull}) {
      for (std::int32_t choice = 0; choice < 3; ++choice) {
        for (std::int32_t call = 0; call < 3; ++call) {
          const std::string id = tool_call_id(seed, context, choice, call);
          EXPECT_EQ(id.size(), 29u);
          EXPECT_EQ(id.rfind("call_", 0), 0u);
          ids.insert(id);
        }
      }
    }
  }
  EXPECT_EQ(ids.size(), 36u);
}

}  // namespace
}  // namespace detinfer::chat
