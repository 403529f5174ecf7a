// Scanning helpers shared by the tool-call parsers (tool_calls.cpp, tool_calls_forms.cpp):
// whitespace, the extent of a JSON value with its strings opaque, bounded JSON parsing and
// the call-object rule. Internal to the chat module.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "chat/tool_calls.h"

namespace detinfer::chat::detail {

using Json = nlohmann::ordered_json;

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgsTag = "[ARGS]";
constexpr std::string_view kMistralCallIdTag = "[CALL_ID]";

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A character of a Mistral function name ([A-Za-z0-9_.-]).
inline bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

inline std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// One past the bracket that closes the JSON object or array opening at s[start], scanning
// strings (with their escapes) as opaque; npos when the text ends first.
std::size_t json_end(std::string_view s, std::size_t start);

// core::parse_json_ordered with one call's limits (depth 64, 1 MiB); nullopt when invalid.
std::optional<Json> parse(std::string_view text);

// {"name": string, "arguments" | "parameters": object} -> a call; nothing else is one.
std::optional<ParsedToolCall> call_from(const Json& j);

// The text, or nullopt when it is only whitespace.
std::optional<std::string> content_of(std::string text);

// Llama 3 JSON: the whole message (after an optional <|python_tag|>) is one call object,
// or several separated by ';'; otherwise it is all content.
ParsedMessage parse_llama3(std::string_view text);

// Mistral (tool_calls_forms.cpp): content, then one or more `[TOOL_CALLS]name[ARGS]{..}`
// (tokenizer v11 and later; `[CALL_ID]id` before `[ARGS]` allowed, `[ARGS]` optional), or
// the older `[TOOL_CALLS] [{..}, ..]`; without the tags (decoded without special tokens) a
// message that is only `name{..}` calls or only a JSON array of calls.
ParsedMessage parse_mistral(std::string_view text);

// Pythonic (tool_calls_forms.cpp): the whole message is `[f(a=1, b="x"), g()]`, optionally
// between <|python_start|> and <|python_end|>; otherwise parsed as Llama 3 JSON.
ParsedMessage parse_pythonic(std::string_view text);

}  // namespace detinfer::chat::detail
