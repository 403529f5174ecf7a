#include "chat/chat_messages.h"

#include "core/check.h"
#include "core/json_parse.h"

namespace detinfer {

namespace chat {

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, field + ": " + what, field);
}

std::string string_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = j.at(key);
  if (!v.is_string()) bad(where + "." + key, "expected a string");
  return v.get<std::string>();
}

std::optional<std::string> optional_string(const Json& j, const char* key,
                                           const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad(where + "." + key, "expected a string or null");
  return it->get<std::string>();
}

void read_content(const Json& j, const std::string& where, ChatMessage& m) {
  const auto it = j.find("content");
  if (it == j.end() || it->is_null()) return;
  if (it->is_string()) {
    m.content = it->get<std::string>();
    return;
  }
  if (!it->is_array()) bad(where + ".content", "expected a string, null or a list of parts");
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& p = (*it)[i];
    const std::string at = str_cat(where, ".content[", i, "]");
    if (!p.is_object()) bad(at, "expected an object {\"type\", \"text\"}");
    ChatContentPart part;
    if (p.contains("type")) part.type = string_field(p, "type", at);
    if (part.type != "text")
      bad(at + ".type", "only \"text\" parts are supported, got \"" + part.type + "\"");
    if (!p.contains("text")) bad(at + ".text", "missing");
    part.text = string_field(p, "text", at);
    m.parts.push_back(std::move(part));
  }
}

ChatToolCall tool_call_from_json(const Json& c, const std::string& at) {
  if (!c.is_object()) bad(at, "expected an object");
  ChatToolCall call;
  if (const auto id = optional_string(c, "id", at)) call.id = *id;
  if (const auto type = optional_string(c, "type", at)) call.type = *type;
  const auto f = c.find("function");
  if (f == c.end() || !f->is_object()) bad(at + ".function", "expected an object");
  if (!f->contains("name")) bad(at + ".function.name", "missing");
  call.name = string_field(*f, "name", at + ".function");
  const auto args = f->find("arguments");
  if (args == f->end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_string()) {
    call.arguments = args->get<std::string>();
  } else {
    call.arguments = args->dump();
  }
  return call;
}

// The arguments as the template sees them: parsed (keys in the client's order) when they
// are JSON, else the text. Nesting deeper than kMessageLimits is an error naming `at`,
// found by an iterative scan before any parse (issue 33: 100,000 nested "[" once crashed).
Json arguments_to_template(const std::string& text, const std::string& at) {
  const std::int64_t depth = core::json_nesting_depth(text, kMessageLimits.max_depth);
  if (depth > kMessageLimits.max_depth) {
    bad(at, str_cat("JSON nested deeper than ", kMessageLimits.max_depth, " levels"));
  }
  try {
    return core::parse_json_ordered(text, kMessageLimits, ErrorCode::kInvalidArgument, at);
  } catch (const Error&) {
    return Json(text);  // not JSON: the template sees the string, as vLLM passes it
  }
}

Json tool_call_to_template(const ChatToolCall& c, const std::string& at) {
  Json call = Json::object();
  if (!c.id.empty()) call["id"] = c.id;
  call["type"] = c.type;
  Json f = Json::object();
  f["name"] = c.name;
  f["arguments"] = arguments_to_template(c.arguments, at + ".function.arguments");
  call["function"] = std::move(f);
  return call;
}

Json content_json(const ChatMessage& m) {
  if (!m.parts.empty()) {
    Json parts = Json::array();
    for (const ChatContentPart& p : m.parts) parts.push_back({{"type", p.type}, {"text", p.text}});
    return parts;
  }
  return m.content ? Json(*m.content) : Json(nullptr);
}

}  // namespace

ChatMessage message_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "expected an object");
  ChatMessage m;
  if (!j.contains("role")) bad(where + ".role", "missing");
  m.role = string_field(j, "role", where);
  if (m.role.empty()) bad(where + ".role", "must not be empty");
  read_content(j, where, m);
  m.name = optional_string(j, "name", where);
  m.tool_call_id = optional_string(j, "tool_call_id", where);
  m.reasoning_content = optional_string(j, "reasoning_content", where);
  const auto calls = j.find("tool_calls");
  if (calls != j.end() && !calls->is_null()) {
    if (!calls->is_array()) bad(where + ".tool_calls", "expected a list");
    for (std::size_t i = 0; i < calls->size(); ++i) {
      m.tool_calls.push_back(
          tool_call_from_json((*calls)[i], str_cat(where, ".tool_calls[", i, "]")));
    }
  }
  return m;
}

std::int64_t conversation_bytes(const std::vector<ChatMessage>& messages,
                                const ChatTemplateOptions& options) {
  std::size_t n = options.tools_json.size() + options.extra_variables_json.size();
  for (const ChatMessage& m : messages) {
    n += m.role.size() + (m.content ? m.content->size() : 0) + (m.name ? m.name->size() : 0) +
         (m.tool_call_id ? m.tool_call_id->size() : 0) +
         (m.reasoning_content ? m.reasoning_content->size() : 0);
    for (const ChatContentPart& p : m.parts) n += p.type.size() + p.text.size();
    for (const ChatToolCall& c : m.tool_calls) {
      n += c.id.size() + c.type.size() + c.name.size() + c.arguments.size();
    }
  }
  return static_cast<std::int64_t>(n);
}

Json messages_to_template_json(const std::vector<ChatMessage>& messages) {
  Json out = Json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    Json j = Json::object();
    j["role"] = m.role;
    j["content"] = content_json(m);
    if (m.name) j["name"] = *m.name;
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
        calls.push_back(tool_call_to_template(m.tool_calls[k],
                                              str_cat("messages[", i, "].tool_calls[", k, "]")));
      }
      j["tool_calls"] = std::move(calls);
    }
    if (m.tool_call_id) j["tool_call_id"] = *m.tool_call_id;
    if (m.reasoning_content) j["reasoning_content"] = *m.reasoning_content;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace chat

std::vector<ChatMessage> chat_messages_from_json(const std::string& json_text) {
  // Hardened parse (depth, size, UTF-8; field "messages") keeping the key order: tool-call
  // arguments print in the client's order, as in Python.
  const chat::Json j = core::parse_json_ordered(json_text, chat::kMessageLimits,
                                                ErrorCode::kInvalidArgument, "messages");
  if (!j.is_array()) {
    throw Error(ErrorCode::kInvalidArgument, "messages: expected a list of messages", "messages");
  }
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    out.push_back(chat::message_from_json(j[i], str_cat("messages[", i, "]")));
  }
  return out;
}

std::string chat_messages_to_json(const std::vector<ChatMessage>& messages) {
  chat::Json j = chat::messages_to_template_json(messages);
  // OpenAI's shape: arguments as JSON strings.
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (!j[i].contains("tool_calls")) continue;
    for (std::size_t c = 0; c < messages[i].tool_calls.size(); ++c) {
      j[i]["tool_calls"][c]["function"]["arguments"] = messages[i].tool_calls[c].arguments;
    }
  }
  return j.dump();
}

}  // namespace detinfer
