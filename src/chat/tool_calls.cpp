#include "chat/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "chat/tool_calls_scan.h"
#include "core/json_parse.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"

namespace detinfer::chat {

namespace detail {

namespace {
// Limits of one call's JSON (the request body's own depth limit is 64).
constexpr core::JsonLimits kCallLimits{64, 1u << 20, true};
}  // namespace

std::size_t json_end(std::string_view s, std::size_t start) {
  std::int64_t depth = 0;
  bool in_string = false;
  for (std::size_t i = start; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<Json> parse(std::string_view text) {
  try {
    return core::parse_json_ordered(text, kCallLimits, ErrorCode::kInvalidArgument, "tool call");
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<ParsedToolCall> call_from(const Json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const bool has_args = j.contains("arguments");
  const bool has_params = j.contains("parameters");
  if (has_args && has_params) return std::nullopt;
  ParsedToolCall call;
  call.name = j["name"].get<std::string>();
  if (call.name.empty()) return std::nullopt;
  if (!has_args && !has_params) {
    call.arguments = "{}";
    return call;
  }
  const Json& args = has_args ? j["arguments"] : j["parameters"];
  if (!args.is_object()) return std::nullopt;
  call.arguments = args.dump();
  return call;
}

std::optional<std::string> content_of(std::string text) {
  for (const char c : text) {
    if (!is_space(c)) return text;
  }
  return std::nullopt;
}

}  // namespace detail

namespace {

using detail::call_from;
using detail::content_of;
using detail::Json;
using detail::json_end;
using detail::kMistralArgsTag;
using detail::kMistralTag;
using detail::kPythonTag;
using detail::parse;
using detail::skip_space;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
// In the system prompt of Llama 3.2 / 4's pythonic tool templates.
constexpr std::string_view kPythonicMarker = "[func_name1(";
constexpr std::string_view kPythonStart = "<|python_start|>";

bool contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

// Hermes: every <tool_call> JSON </tool_call> (the closing tag may be missing at the end
// of the text) whose JSON is a call; the rest of the text is content.
ParsedMessage parse_hermes(std::string_view text) {
  ParsedMessage out;
  std::string content;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t open = text.find(kHermesOpen, i);
    if (open == std::string_view::npos) break;
    content.append(text.substr(i, open - i));
    const std::size_t body = skip_space(text, open + kHermesOpen.size());
    const std::size_t end =
        body < text.size() && text[body] == '{' ? json_end(text, body) : std::string_view::npos;
    std::optional<ParsedToolCall> call;
    std::size_t after = std::string_view::npos;
    if (end != std::string_view::npos) {
      const std::size_t tail = skip_space(text, end);
      if (text.substr(tail, kHermesClose.size()) == kHermesClose) {
        after = tail + kHermesClose.size();
      } else if (tail == text.size()) {
        after = tail;  // unclosed at the very end (the model stopped after the JSON)
      }
      if (after != std::string_view::npos) {
        if (auto j = parse(text.substr(body, end - body))) call = call_from(*j);
      }
    }
    if (!call) {  // not a call: the tag is content, go on after it
      content.append(kHermesOpen);
      i = open + kHermesOpen.size();
      continue;
    }
    out.calls.push_back(std::move(*call));
    i = after;
  }
  if (i < text.size()) content.append(text.substr(i));
  out.content = content_of(std::move(content));
  return out;
}

}  // namespace

namespace detail {

ParsedMessage parse_llama3(std::string_view text) {
  ParsedMessage whole{content_of(std::string(text)), {}};
  std::size_t i = skip_space(text, 0);
  if (text.substr(i, kPythonTag.size()) == kPythonTag) i = skip_space(text, i + kPythonTag.size());
  std::vector<ParsedToolCall> calls;
  while (i < text.size()) {
    if (text[i] != '{') return whole;
    const std::size_t end = json_end(text, i);
    if (end == std::string_view::npos) return whole;
    const auto j = parse(text.substr(i, end - i));
    auto call = j ? call_from(*j) : std::nullopt;
    if (!call) return whole;
    calls.push_back(std::move(*call));
    i = skip_space(text, end);
    if (i < text.size() && text[i] == ';') i = skip_space(text, i + 1);
  }
  if (calls.empty()) return whole;
  return {std::nullopt, std::move(calls)};
}

}  // namespace detail

const char* to_string(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kMistralArgs:
      return "mistral_args";
    case ToolCallFormat::kPythonic:
      return "pythonic";
  }
  return "hermes";
}

ToolCallFormat detect_tool_call_format(std::string_view rendered,
                                       const std::function<bool(std::string_view)>& has_token) {
  const auto token = [&](std::string_view t) { return has_token && has_token(t); };
  if (contains(rendered, kMistralArgsTag) || token(kMistralArgsTag)) {
    return ToolCallFormat::kMistralArgs;
  }
  if (contains(rendered, kMistralTag) || contains(rendered, "[AVAILABLE_TOOLS]") ||
      token(kMistralTag)) {
    return ToolCallFormat::kMistral;
  }
  if (contains(rendered, kHermesOpen) || token(kHermesOpen)) return ToolCallFormat::kHermes;
  if (contains(rendered, kPythonicMarker) || contains(rendered, kPythonStart) ||
      token(kPythonStart)) {
    return ToolCallFormat::kPythonic;
  }
  if (contains(rendered, kPythonTag) || contains(rendered, "<|start_header_id|>") ||
      token(kPythonTag)) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kHermes;
}

ParsedMessage parse_tool_calls(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3:
      return detail::parse_llama3(text);
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kMistralArgs:
      return detail::parse_mistral(text);
    case ToolCallFormat::kPythonic:
      return detail::parse_pythonic(text);
    case ToolCallFormat::kHermes:
      break;
  }
  return parse_hermes(text);
}

namespace {

// Llama 3 / pythonic: the whole message is calls or none, so nothing is content while it
// starts (after whitespace) with what could open a call.
std::size_t whole_message_prefix(std::string_view partial, bool pythonic) {
  const std::size_t i = skip_space(partial, 0);
  const std::string_view rest = partial.substr(i);
  const auto maybe = [&](std::string_view tag) {
    return rest.substr(0, tag.size()) == tag.substr(0, rest.size());
  };
  if (i == partial.size() || rest[0] == '{' || maybe(kPythonTag)) return 0;
  if (pythonic && (rest[0] == '[' || maybe(kPythonStart))) return 0;
  return partial.size();
}

// Mistral: a message that is still only a function name (or a name and `[ARGS` / `{`...)
// or starts with `[` may be calls written without their [TOOL_CALLS] token.
bool mistral_may_be_calls(std::string_view partial) {
  std::size_t i = skip_space(partial, 0);
  if (i < partial.size() && partial[i] == '[') return true;
  while (i < partial.size() && detail::is_name_char(partial[i])) ++i;
  return i == partial.size() || partial[i] == '{' || partial[i] == '[';
}

bool is_plain_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), detail::is_name_char);
}

}  // namespace

std::size_t content_prefix_length(std::string_view partial, ToolCallFormat format) {
  if (format == ToolCallFormat::kLlama3 || format == ToolCallFormat::kPythonic) {
    return whole_message_prefix(partial, format == ToolCallFormat::kPythonic);
  }
  const bool mistral = format == ToolCallFormat::kMistral || format == ToolCallFormat::kMistralArgs;
  if (mistral && mistral_may_be_calls(partial)) return 0;
  std::size_t n = partial.size();
  const std::string_view tag = mistral ? kMistralTag : kHermesOpen;
  const std::size_t at = partial.find(tag);
  if (at != std::string_view::npos) {
    n = at;
  } else {  // a trailing part of the tag may still become one
    for (std::size_t k = std::min(tag.size() - 1, partial.size()); k > 0; --k) {
      if (partial.substr(partial.size() - k) == tag.substr(0, k)) {
        n = partial.size() - k;
        break;
      }
    }
  }
  return skip_space(partial.substr(0, n), 0) == n ? 0 : n;
}

ForcedCall forced_call(ToolCallFormat format, const std::optional<std::string>& name) {
  // Pythonic models are forced into the Llama 3 JSON form (the only form a JSON Schema
  // can constrain; parse_tool_calls reads it for them too).
  const bool json_params = format == ToolCallFormat::kLlama3 || format == ToolCallFormat::kPythonic;
  const char* args_key = json_params ? "parameters" : "arguments";
  if (format == ToolCallFormat::kMistralArgs && name && is_plain_name(*name)) {
    return {std::string(kMistralTag) + *name + std::string(kMistralArgsTag), ""};
  }
  std::string head;
  if (name) head = "{\"name\": " + Json(*name).dump() + ", \"" + args_key + "\": ";
  const std::string tail = name ? "}" : "";
  switch (format) {
    case ToolCallFormat::kLlama3:
    case ToolCallFormat::kPythonic:
      return {head, tail};
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kMistralArgs:  // several functions: the older JSON array form
      return {std::string(kMistralTag) + " [" + head, tail + "]"};
    case ToolCallFormat::kHermes:
      break;
  }
  return {std::string(kHermesOpen) + "\n" + head, tail + "\n" + std::string(kHermesClose)};
}

std::string call_object_schema(ToolCallFormat format, const std::string& name,
                               const std::string& parameters_schema) {
  const bool json_params = format == ToolCallFormat::kLlama3 || format == ToolCallFormat::kPythonic;
  const std::string key = json_params ? "\"parameters\"" : "\"arguments\"";
  return "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":" + Json(name).dump() + "}," +
         key + ":" + parameters_schema + "},\"required\":[\"name\"," + key +
         "],\"additionalProperties\":false}";
}

std::string tool_call_id(std::uint64_t seed, std::uint64_t context, std::int32_t choice,
                         std::int32_t call) {
  const std::string key = "tool_call/" + std::to_string(seed) + "/" + std::to_string(context) +
                          "/" + std::to_string(choice) + "/" + std::to_string(call);
  const Hash128 h = xxh3_128(key);
  return "call_" + hex64(h.high).substr(8) + hex64(h.low);
}

}  // namespace detinfer::chat
