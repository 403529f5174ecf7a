// Tool calls on /v1/chat/completions (docs/tools.md): the request's `tools`,
// `tool_choice` and `parallel_tool_calls` (validated: 400s naming the parameter), the
// forced call of tool_choice "required" or a named function (the call opened at the end
// of the prompt, its JSON constrained by response_format), and the answer's
// message.tool_calls parsed from the generated text (src/chat/tool_calls.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "detinfer/generation.h"
#include "detinfer/session.h"

namespace detinfer_cli {

enum class ToolChoice : std::uint8_t { kAuto = 0, kNone = 1, kRequired = 2, kNamed = 3 };

// What a chat request asks of tools; parse() is false when the output is not parsed for
// calls (no tools, or tool_choice "none").
struct ToolRequest {
  bool parse = false;
  ToolChoice choice = ToolChoice::kAuto;
  bool parallel = true;  // parallel_tool_calls
  detinfer::chat::ToolCallFormat format = detinfer::chat::ToolCallFormat::kHermes;
  // A forced call (required / named): the text appended to the prompt and the text that
  // closes the generated JSON before it is parsed.
  std::optional<detinfer::chat::ForcedCall> forced;
  std::string forced_name;    // kNamed: the function
  std::uint64_t context = 0;  // the ids' context: a hash of the prompt's token ids
  // Every function: its name and its parameters schema as JSON text.
  std::vector<std::pair<std::string, std::string>> functions;
};

struct ServeRequest;

// Reads `tools`, `tool_choice` and `parallel_tool_calls` into req.tools (each error a 400
// naming its parameter: a function without a name, parameters that are not an object
// schema, an unknown name in tool_choice, ...). Returns the tools JSON the chat template
// gets ("" for none: no tools, or tool_choice "none"). `ordered` keeps the client's order.
std::string read_tool_params(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                             ServeRequest& req);

// After the prompt is rendered and the sampling fields read: the format from the rendered
// prompt and the vocabulary; for a forced call, the prefix's tokens appended to the
// prompt and response_format set to the call's JSON schema (a client's own
// response_format beside it is a 400 naming tool_choice).
void apply_tool_request(const detinfer::DeterministicSession& session, ServeRequest& req);

// One choice's message as the answer carries it.
struct ToolMessage {
  nlohmann::json content;     // string or null
  nlohmann::json tool_calls;  // array of OpenAI tool calls; empty: none
  const char* finish_reason = "stop";
};

// The message of a choice: without tool parsing its text; with it, the calls parsed from
// the text (for a forced call: prefix + text + suffix) with ids from (seed, the prompt's
// hash, choice, call),
// content the rest (null when only whitespace or a forced call), finish_reason
// "tool_calls" when a finished choice made calls. parallel_tool_calls false keeps the
// first call.
ToolMessage tool_message(const ToolRequest& tools, std::uint64_t seed, std::int32_t choice,
                         const std::string& text, detinfer::FinishReason finish);

}  // namespace detinfer_cli
