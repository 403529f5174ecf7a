// Chat messages as the JSON a chat template sees (transformers passes the message dicts
// as given; tool-call arguments parsed, as vLLM does).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_parse.h"
#include "detinfer/chat.h"

namespace detinfer::chat {

// Limits of JSON a caller passes (messages, tools, extra template variables).
inline constexpr core::JsonLimits kMessageLimits{/*max_depth=*/64,
                                                 /*max_bytes=*/std::size_t{64} << 20, true};

// A list of message objects: role, content (string, null or parts), and name,
// tool_calls, tool_call_id, reasoning_content when set.
nlohmann::ordered_json messages_to_template_json(const std::vector<ChatMessage>& messages);

// The bytes of text a conversation hands a template: contents, parts, names, tool calls,
// reasoning, tools and extra variables (what rendering and tokenizing grow with).
std::int64_t conversation_bytes(const std::vector<ChatMessage>& messages,
                                const ChatTemplateOptions& options);

// One message from OpenAI-shaped JSON; `where` is e.g. "messages[2]" and prefixes the
// offending field of an Error(kInvalidArgument).
ChatMessage message_from_json(const nlohmann::ordered_json& j, const std::string& where);

}  // namespace detinfer::chat
