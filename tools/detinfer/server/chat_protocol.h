// The OpenAI /v1/chat/completions wire format, as `detinfer serve` speaks it
// (docs/chat.md, "Server"): request validation (messages rendered through the model's chat
// template; sampling fields the request omits taken from generation_config.json) and the
// chat.completion / chat.completion.chunk bodies. Transport-independent.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/chat.h"
#include "detinfer/session.h"
#include "openai_protocol.h"

namespace detinfer_cli {

// Parses and validates a /v1/chat/completions body (read once): the messages rendered
// through the model's chat template into req.prompt's token ids; the sampling fields the
// request omits from the model's defaults (generation_config.json) before OpenAI's
// (resolve_generation_params()), max_tokens defaulting to the model's max_new_tokens
// capped at the context the prompt leaves. Returns the request or the error to send.
ParseOutcome parse_chat_request(const std::string& body, const std::string& served_model,
                                const detinfer::DeterministicSession& session);

// The chat-format logprobs of one choice: {"content": [{token, logprob, bytes,
// top_logprobs: [{token, logprob, bytes}]}]}; a token's text is its decoded bytes (invalid
// UTF-8 replaced by U+FFFD in "token", exact in "bytes").
nlohmann::json chat_logprobs_json(const std::vector<detinfer::StepLogprobs>& steps,
                                  std::int32_t top_n, const detinfer::Tokenizer* tokenizer);

// The non-streamed chat.completion body (with detinfer's seed, digests and fingerprint).
nlohmann::json chat_response(const ResponseContext& ctx, const ServeRequest& req,
                             const detinfer::GenerationResult& result,
                             const detinfer::DeterministicSession& session, bool full_fingerprint);

// One chat.completion.chunk with one choice: `delta` ({"role": "assistant", "content": ""}
// first, then {"content": text}, then {} with the finish reason), `logprobs` (null or the
// chat format) and finish_reason (nullptr while generating).
nlohmann::json chat_chunk(const ResponseContext& ctx, std::int32_t index, nlohmann::json delta,
                          nlohmann::json logprobs, const char* finish_reason);

// stream_options.include_usage: the last chunk, with no choices and the usage.
nlohmann::json chat_usage_chunk(const ResponseContext& ctx,
                                const detinfer::GenerationResult& result);

}  // namespace detinfer_cli
