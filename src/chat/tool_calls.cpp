#include "chat/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"

namespace detinfer::chat {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
// Limits of one call's JSON (the request body's own depth limit is 64).
constexpr core::JsonLimits kCallLimits{64, 1u << 20, true};

bool contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// One past the bracket that closes the JSON object or array opening at s[start], scanning
// strings (with their escapes) as opaque; npos when the text ends first.
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

// {"name": string, "arguments" | "parameters": object} -> a call; nothing else is one.
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

// The calls of a JSON array of call objects, or of one call object; nullopt unless every
// element is a call.
std::optional<std::vector<ParsedToolCall>> calls_of(const Json& j) {
  std::vector<ParsedToolCall> calls;
  if (j.is_object()) {
    auto c = call_from(j);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    return calls;
  }
  if (!j.is_array() || j.empty()) return std::nullopt;
  for (const Json& e : j) {
    auto c = call_from(e);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
  }
  return calls;
}

// Llama 3: the whole message (after an optional <|python_tag|>) is one call object, or
// several separated by ';'. Otherwise it is all content.
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

// Mistral: content, then [TOOL_CALLS] and a JSON array of call objects (or one object).
// [TOOL_CALLS] is a special token, left out of text decoded without them: then a message
// that is only a JSON array of calls is the calls.
ParsedMessage parse_mistral(std::string_view text) {
  ParsedMessage whole{content_of(std::string(text)), {}};
  std::size_t tag = text.find(kMistralTag);
  std::size_t body = 0;
  if (tag != std::string_view::npos) {
    body = skip_space(text, tag + kMistralTag.size());
  } else {
    tag = body = skip_space(text, 0);
    if (body >= text.size() || text[body] != '[') return whole;
    const std::size_t end = json_end(text, body);
    if (end == std::string_view::npos || skip_space(text, end) != text.size()) return whole;
  }
  if (body >= text.size() || (text[body] != '[' && text[body] != '{')) return whole;
  const std::size_t end = json_end(text, body);
  if (end == std::string_view::npos) return whole;
  const auto j = parse(text.substr(body, end - body));
  auto calls = j ? calls_of(*j) : std::nullopt;
  if (!calls) return whole;
  ParsedMessage out;
  out.calls = std::move(*calls);
  out.content = content_of(std::string(text.substr(0, tag)) + std::string(text.substr(end)));
  return out;
}

}  // namespace

const char* to_string(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "hermes";
}

ToolCallFormat detect_tool_call_format(std::string_view rendered,
                                       const std::function<bool(std::string_view)>& has_token) {
  const auto token = [&](std::string_view t) { return has_token && has_token(t); };
  if (contains(rendered, kMistralTag) || contains(rendered, "[AVAILABLE_TOOLS]") ||
      token(kMistralTag)) {
    return ToolCallFormat::kMistral;
  }
  if (contains(rendered, kHermesOpen) || token(kHermesOpen)) return ToolCallFormat::kHermes;
  if (contains(rendered, kPythonTag) || contains(rendered, "<|start_header_id|>") ||
      token(kPythonTag)) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kHermes;
}

ParsedMessage parse_tool_calls(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3:
      return parse_llama3(text);
    case ToolCallFormat::kMistral:
      return parse_mistral(text);
    case ToolCallFormat::kHermes:
      break;
  }
  return parse_hermes(text);
}

std::size_t content_prefix_length(std::string_view partial, ToolCallFormat format) {
  std::size_t n = partial.size();
  if (format == ToolCallFormat::kLlama3) {
    const std::size_t i = skip_space(partial, 0);
    const std::string_view rest = partial.substr(i);
    const bool maybe_tag = rest.substr(0, kPythonTag.size()) == kPythonTag.substr(0, rest.size());
    if (i == partial.size() || rest[0] == '{' || maybe_tag) return 0;
    return n;
  }
  if (format == ToolCallFormat::kMistral) {  // a message that may be a bare array of calls
    const std::size_t i = skip_space(partial, 0);
    if (i < partial.size() && partial[i] == '[') return 0;
  }
  const std::string_view tag = format == ToolCallFormat::kMistral ? kMistralTag : kHermesOpen;
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
  const char* args_key = format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
  std::string head;
  if (name) head = "{\"name\": " + Json(*name).dump() + ", \"" + args_key + "\": ";
  const std::string tail = name ? "}" : "";
  switch (format) {
    case ToolCallFormat::kLlama3:
      return {head, tail};
    case ToolCallFormat::kMistral:
      return {std::string(kMistralTag) + " [" + head, tail + "]"};
    case ToolCallFormat::kHermes:
      break;
  }
  return {std::string(kHermesOpen) + "\n" + head, tail + "\n" + std::string(kHermesClose)};
}

std::string call_object_schema(ToolCallFormat format, const std::string& name,
                               const std::string& parameters_schema) {
  const std::string key = format == ToolCallFormat::kLlama3 ? "\"parameters\"" : "\"arguments\"";
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
