// The one typed request of `detinfer serve` (docs/server.md, "One request pipeline"):
// every route's thin parser (completions: openai_protocol.h, chat: chat_protocol.h) reads
// its body once into a ServeRequest, and one pipeline (serve_app.h) admits, submits,
// answers whole or streamed and records it; only the rendering of the answer differs by
// dialect. Header-only: the policy code (serve_policy.h) reads it without the parsers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/generation_fields.h"
#include "detinfer/generation.h"
#include "detinfer/session.h"
#include "detinfer/transcript.h"
#include "tool_params.h"

namespace detinfer_cli {

// The wire format a request came in, and the one its answer is rendered in.
enum class Dialect : std::uint8_t {
  kCompletion = 0,  // POST /v1/completions: text_completion
  kChat = 1,        // POST /v1/chat/completions: chat.completion[.chunk]
};

// Where a GenerationConfig field's value came from, lowest precedence first: the API's
// default (openai_defaults()), the model's generation_config.json (chat), the client.
enum class FieldSource : std::uint8_t { kApi = 0, kModel = 1, kClient = 2 };

// The source of every GenerationConfig field, by its table key (core/generation_fields.h).
class FieldSources {
 public:
  FieldSource of(std::string_view key) const {
    const int i = index(key);
    return i < 0 ? FieldSource::kApi : sources_[static_cast<std::size_t>(i)];
  }
  bool given(std::string_view key) const { return of(key) == FieldSource::kClient; }
  void set(std::string_view key, FieldSource s) {
    const int i = index(key);
    if (i >= 0) sources_[static_cast<std::size_t>(i)] = s;
  }

 private:
  static int index(std::string_view key) {
    int at = -1, i = 0;
    const detinfer::GenerationConfig c;
    detinfer::core::for_each_field(c, [&](const detinfer::core::FieldSpec& f, const auto&) {
      if (f.key == key) at = i;
      ++i;
    });
    return at;
  }
  std::array<FieldSource, detinfer::core::kGenerationFieldCount> sources_{};
};

// How this request spells the parameters an error may name (request_param(),
// openai_fields.h): its dialect and which of the max-token names the client sent.
struct ParamNames {
  Dialect dialect = Dialect::kCompletion;
  std::string max_tokens = "max_tokens";  // chat: "max_completion_tokens" when sent
  // The parameter a response_format error names: "tools" when a forced tool call set it.
  std::string response_format = "response_format";
};

struct ServeRequest {
  ParamNames names;
  Dialect dialect() const { return names.dialect; }
  // Completions: the prompt as sent; chat: the rendered conversation's token ids.
  detinfer::Prompt prompt{std::vector<std::int32_t>{}};
  std::string prompt_text;  // completions' echo: the text form of the prompt
  bool prompt_is_text = true;
  detinfer::GenerationConfig config;  // resolved: client > model defaults > API defaults
  FieldSources sources;               // where each field of `config` came from
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  // Completions: echo, and logprobs N (top entries per token; 0 = only the sampled one).
  bool echo = false;
  std::int32_t logprobs = 0;
  bool logprobs_requested = false;
  // Chat: "logprobs": true and "top_logprobs" (0..20).
  bool chat_logprobs = false;
  std::int32_t top_logprobs = 0;
  // Chat: tools, tool_choice, parallel_tool_calls (tool_params.h).
  ToolRequest tools;
  // Chat: the conversation the prompt was rendered from (plus a forced call's opening),
  // carried by the response's transcript.
  std::optional<detinfer::TranscriptChat> chat;
};

// The completions parser's name for the request (tests and the fuzz target use it).
using CompletionRequest = ServeRequest;

}  // namespace detinfer_cli
