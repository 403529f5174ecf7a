// The Mistral [ARGS] and pythonic tool-call forms (src/chat/tool_calls_forms.cpp): calls
// with and without their special tokens, Python literals read into JSON, everything that
// is not a call staying content, detection, streaming holds and forced calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "chat/tool_calls.h"

namespace detinfer::chat {
namespace {

using nlohmann::json;

TEST(MistralArgsCalls, TaggedCallsAndContent) {
  for (const ToolCallFormat f : {ToolCallFormat::kMistralArgs, ToolCallFormat::kMistral}) {
    const ParsedMessage m = parse_tool_calls(
        "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris [ARGS] }\", \"days\": 2}"
        "[TOOL_CALLS]get_time[ARGS]{}",
        f);
    ASSERT_EQ(m.calls.size(), 2u) << to_string(f);
    EXPECT_EQ(m.calls[0].name, "get_weather");
    EXPECT_EQ(m.calls[0].arguments, R"({"city":"Paris [ARGS] }","days":2})");
    EXPECT_EQ(m.calls[1].name, "get_time");
    EXPECT_EQ(m.calls[1].arguments, "{}");
    EXPECT_EQ(m.content.value_or("<none>"), "Checking.");
  }
  // [CALL_ID] before [ARGS] (tokenizer v13) is skipped; the older array form still reads.
  const ParsedMessage id =
      parse_tool_calls("[TOOL_CALLS]f[CALL_ID]a1B2c3D4e[ARGS]{\"x\": [1, {\"y\": null}]}",
                       ToolCallFormat::kMistralArgs);
  ASSERT_EQ(id.calls.size(), 1u);
  EXPECT_EQ(id.calls[0].arguments, R"({"x":[1,{"y":null}]})");
  EXPECT_FALSE(id.content.has_value());
  const ParsedMessage old = parse_tool_calls(
      "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", ToolCallFormat::kMistralArgs);
  ASSERT_EQ(old.calls.size(), 1u);
  EXPECT_EQ(old.calls[0].name, "f");
}

TEST(MistralArgsCalls, WithoutSpecialTokensOnlyAWholeMessageOfCalls) {
  // [TOOL_CALLS] and [ARGS] are special tokens: text decoded without them.
  const ParsedMessage m = parse_tool_calls(" get_weather{\"city\": \"Paris\"}\nget_time{} ",
                                           ToolCallFormat::kMistralArgs);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].name, "get_weather");
  EXPECT_EQ(m.calls[1].name, "get_time");
  EXPECT_FALSE(m.content.has_value());
  for (const char* text :
       {"Hello {\"a\": 1}", "f{\"a\": 1} and more", "f{\"a\": 1", "f[ARGS][1, 2]",
        "[TOOL_CALLS]f[ARGS]{bad json}", "[TOOL_CALLS]f[ARGS]\"s\"", "[TOOL_CALLS][ARGS]{}",
        "[TOOL_CALLS]", "plain text", "{\"name\": \"f\"}"}) {
    const ParsedMessage c = parse_tool_calls(text, ToolCallFormat::kMistralArgs);
    EXPECT_TRUE(c.calls.empty()) << text;
    EXPECT_EQ(c.content.value_or(""), text);
  }
}

TEST(PythonicCalls, ListOfCallsWithPythonLiterals) {
  const ParsedMessage m = parse_tool_calls(
      "[get_weather(city=\"Paris\", days=2), get_time(), "
      "f(a='it\\'s', b=1.5, c=-3, d=True, e=None, g=[1, (2, 3), ], h={'k': \"v\", \"n\": {}}, "
      "i=\"\\u00e9\\x41\\n\", j=False, k=2.5e-3,)]",
      ToolCallFormat::kPythonic);
  ASSERT_EQ(m.calls.size(), 3u);
  EXPECT_EQ(m.calls[0].name, "get_weather");
  EXPECT_EQ(m.calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(m.calls[1].name, "get_time");
  EXPECT_EQ(m.calls[1].arguments, "{}");
  EXPECT_EQ(json::parse(m.calls[2].arguments),
            json::parse(R"({"a": "it's", "b": 1.5, "c": -3, "d": true, "e": null,
                            "g": [1, [2, 3]], "h": {"k": "v", "n": {}},
                            "i": "\u00e9A\n", "j": false, "k": 0.0025})"));
  EXPECT_FALSE(m.content.has_value());
  const ParsedMessage tagged =
      parse_tool_calls("<|python_start|>[f(x=1)]<|python_end|>", ToolCallFormat::kPythonic);
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_EQ(tagged.calls[0].arguments, R"({"x":1})");
  // Llama 3 JSON is read too (the form forced calls use).
  const ParsedMessage j =
      parse_tool_calls("{\"name\": \"f\", \"parameters\": {\"x\": 1}}", ToolCallFormat::kPythonic);
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(j.calls[0].name, "f");
}

TEST(PythonicCalls, AnythingElseStaysContent) {
  std::string deep = "[f(a=";
  for (int i = 0; i < 200; ++i) deep += "[";
  for (int i = 0; i < 200; ++i) deep += "]";
  deep += ")]";
  for (const std::string& text : {std::string("[]"),
                                  std::string("[1, 2]"),
                                  std::string("[f(1)]"),
                                  std::string("[f(a=1, a=2)]"),
                                  std::string("[f(a=x)]"),
                                  std::string("[f(a=1)] and more"),
                                  std::string("I'd call [f(a=1)]"),
                                  std::string("[f(a=float('inf'))]"),
                                  std::string("[f(a=1e999)]"),
                                  std::string("[f(a=b'x')]"),
                                  std::string("[f(a='''x''')]"),
                                  std::string("[f(a={1: 2})]"),
                                  std::string("[f(a='\\ud800')]"),
                                  std::string("[f(a='open)]"),
                                  std::string("[f(a=1_000)]"),
                                  std::string("[f(a={'k': 1, 'k': 2})]"),
                                  std::string("[f(a=\"\xff\xfe\")]"),
                                  std::string("[f(a=99999999999999999999)]"),
                                  std::string("[f(a=1)"),
                                  std::string("[f(a='\\a')]"),
                                  std::string("[f(a='\\012')]"),
                                  deep}) {
    ParsedMessage c;
    ASSERT_NO_THROW(c = parse_tool_calls(text, ToolCallFormat::kPythonic)) << text;
    EXPECT_TRUE(c.calls.empty()) << text;
    EXPECT_EQ(c.content.value_or(""), text);
  }
}

TEST(ToolCallForms, ContentPrefixHoldsWhatMayBecomeACall) {
  const auto args = [](std::string_view t) {
    return content_prefix_length(t, ToolCallFormat::kMistralArgs);
  };
  EXPECT_EQ(args("get_weather"), 0u);  // may be a call without its tokens
  EXPECT_EQ(args("get_weather{\"ci"), 0u);
  EXPECT_EQ(args("get_weather[ARG"), 0u);
  EXPECT_EQ(args("Hello there"), 11u);
  EXPECT_EQ(args("Hi [TOOL"), 3u);
  EXPECT_EQ(args("Hi [TOOL_CALLS]f[ARGS]{"), 3u);
  const auto py = [](std::string_view t) {
    return content_prefix_length(t, ToolCallFormat::kPythonic);
  };
  EXPECT_EQ(py(" [get_w"), 0u);
  EXPECT_EQ(py("<|python_st"), 0u);
  EXPECT_EQ(py("{\"name"), 0u);
  EXPECT_EQ(py("Hello"), 5u);
  // What was sent is where the parsed content starts.
  const std::string text = "Sure: [TOOL_CALLS]f[ARGS]{\"a\": \"}\"} done";
  const ParsedMessage whole = parse_tool_calls(text, ToolCallFormat::kMistralArgs);
  ASSERT_EQ(whole.calls.size(), 1u);
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    const std::size_t n = args(std::string_view(text).substr(0, cut));
    EXPECT_EQ(whole.content->substr(0, n), text.substr(0, n)) << cut;
  }
}

TEST(ToolCallForms, Detection) {
  const auto none = [](std::string_view) { return false; };
  EXPECT_EQ(detect_tool_call_format("[AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS] "
                                    "[TOOL_CALLS]f[ARGS]{}",
                                    none),
            ToolCallFormat::kMistralArgs);
  const auto v11 = [](std::string_view t) { return t == "[TOOL_CALLS]" || t == "[ARGS]"; };
  EXPECT_EQ(detect_tool_call_format("plain", v11), ToolCallFormat::kMistralArgs);
  // A Llama 3.2 system prompt asking for the pythonic form wins over the Llama 3 markers.
  EXPECT_EQ(detect_tool_call_format(
                "<|start_header_id|>system<|end_header_id|>\n\nyou MUST put it in the format "
                "of [func_name1(params_name1=params_value1, params_name2=params_value2...), "
                "func_name2(params)]",
                none),
            ToolCallFormat::kPythonic);
  const auto llama4 = [](std::string_view t) { return t == "<|python_start|>"; };
  EXPECT_EQ(detect_tool_call_format("plain", llama4), ToolCallFormat::kPythonic);
  EXPECT_STREQ(to_string(ToolCallFormat::kMistralArgs), "mistral_args");
  EXPECT_STREQ(to_string(ToolCallFormat::kPythonic), "pythonic");
}

TEST(ToolCallForms, ForcedCalls) {
  const ForcedCall named = forced_call(ToolCallFormat::kMistralArgs, std::string("get_weather"));
  EXPECT_EQ(named.prefix, "[TOOL_CALLS]get_weather[ARGS]");
  EXPECT_EQ(named.suffix, "");
  const ParsedMessage m = parse_tool_calls(named.prefix + "{\"city\": \"Paris\"}" + named.suffix,
                                           ToolCallFormat::kMistralArgs);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].name, "get_weather");
  EXPECT_EQ(m.calls[0].arguments, R"({"city":"Paris"})");
  // A name the [ARGS] form cannot carry, or no name: the array form.
  EXPECT_EQ(forced_call(ToolCallFormat::kMistralArgs, std::string("a b")).prefix,
            "[TOOL_CALLS] [{\"name\": \"a b\", \"arguments\": ");
  EXPECT_EQ(forced_call(ToolCallFormat::kMistralArgs, std::nullopt).prefix, "[TOOL_CALLS] [");
  EXPECT_EQ(forced_call(ToolCallFormat::kPythonic, std::string("f")).prefix,
            "{\"name\": \"f\", \"parameters\": ");
  const json s = json::parse(call_object_schema(ToolCallFormat::kPythonic, "f", "{}"));
  EXPECT_EQ(s["required"], json({"name", "parameters"}));
}

}  // namespace
}  // namespace detinfer::chat
