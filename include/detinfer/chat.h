// Chat messages and chat-template options (docs/chat.md). A conversation is rendered to a
// prompt by the model's Hugging Face chat template, exactly as transformers'
// apply_chat_template does, then generated from like any prompt
// (DeterministicSession::apply_chat_template / chat).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detinfer/export.h"

namespace detinfer {

// One part of a multi-part content ("content": [{"type": "text", "text": "..."}]).
struct ChatContentPart {
  std::string type = "text";  // passed to the template as is
  std::string text;
};

// A tool call made by an assistant message (OpenAI shape).
struct ChatToolCall {
  std::string id;  // "" = left out
  std::string type = "function";
  std::string name;  // function.name
  // function.arguments as JSON text. Templates see the parsed JSON value when it parses
  // (as vLLM passes them; Llama and Mistral templates iterate the arguments), else the
  // string itself.
  std::string arguments = "{}";
};

struct ChatMessage {
  ChatMessage() = default;
  // A plain message: {"user", "Hello"}.
  ChatMessage(std::string role_, std::optional<std::string> content_ = std::nullopt)  // NOLINT
      : role(std::move(role_)), content(std::move(content_)) {}

  std::string role;                    // "system", "user", "assistant", "tool", ...
  std::optional<std::string> content;  // unset (and no parts) = null content
  std::vector<ChatContentPart> parts;  // non-empty: content is this list of parts
  std::optional<std::string> name;
  std::vector<ChatToolCall> tool_calls;          // empty = left out
  std::optional<std::string> tool_call_id;       // tool results
  std::optional<std::string> reasoning_content;  // thinking models (Qwen3, DeepSeek-R1)
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;  // end with the assistant turn's opening
  std::string tools_json;             // "" = no tools; else a JSON array of tool definitions
  // "" = none; else a JSON object of extra template variables, e.g.
  // {"enable_thinking": false}. They override the special tokens but not messages,
  // tools or add_generation_prompt.
  std::string extra_variables_json;
  // "" = the model's choice: with several named templates, "tool_use" when tools are
  // given and it exists, else "default". Otherwise the name of one of the model's
  // templates (Error(kInvalidArgument) when it has none of that name).
  std::string template_name;
  // The time strftime_now() formats, as Unix seconds (UTC). Unset = the system clock at
  // render time (as transformers); set it to make prompts of date-printing templates
  // (Llama 3.1) reproducible.
  std::optional<std::int64_t> now_unix_seconds;
};

// Messages from OpenAI-shaped JSON text: an array of {"role", "content" (string, null or
// a list of {"type", "text"} parts), "name", "tool_calls" ([{"id", "type", "function":
// {"name", "arguments"}}], arguments a JSON string or any JSON value), "tool_call_id",
// "reasoning_content"}. Throws Error(kInvalidArgument) naming the offending element, e.g.
// "messages[2].content".
DETINFER_API std::vector<ChatMessage> chat_messages_from_json(const std::string& json_text);
// The inverse: an array in the same shape (arguments as JSON strings).
DETINFER_API std::string chat_messages_to_json(const std::vector<ChatMessage>& messages);

}  // namespace detinfer
