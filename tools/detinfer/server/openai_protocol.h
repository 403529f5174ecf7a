// The OpenAI /v1/completions wire format, as `detinfer serve` speaks it: request
// validation into a GenerationConfig, and response / stream chunk rendering.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/generation.h"
#include "detinfer/session.h"
#include "serve_request.h"

namespace detinfer_cli {

// A request the server rejects: HTTP status + OpenAI-style error naming the parameter.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // "" when no single parameter is at fault
  std::string type = "invalid_request_error";
  std::string code;
};

nlohmann::json error_body(const ApiError& e);

// Throws the ApiError (`status`, default 400) naming `param` (request parsers).
[[noreturn]] void reject(const std::string& param, const std::string& message, int status = 400);
// 404 model_not_found for a model name other than the served one.
ApiError model_not_found(const std::string& model, const std::string& served_model);

// Parses and validates a /v1/completions body. `served_model` is the name clients may
// pass as "model". Returns the request or the error to send.
struct ParseOutcome {
  std::optional<ServeRequest> request;
  ApiError error;
};
// What request validation needs to know of the served model.
struct ModelLimits {
  std::int64_t vocab_size = 0;
  std::int64_t context_length = 0;
  const detinfer::Tokenizer* tokenizer = nullptr;  // nullptr: prompts must be token ids
};
ModelLimits model_limits(const detinfer::DeterministicSession& session);
ParseOutcome parse_completion_request(const std::string& body, const std::string& served_model,
                                      const ModelLimits& model);
inline ParseOutcome parse_completion_request(const std::string& body,
                                             const std::string& served_model,
                                             const detinfer::DeterministicSession& session) {
  return parse_completion_request(body, served_model, model_limits(session));
}

// The pieces every dialect's parser shares (each throws ApiError naming the parameter):
// Unknown parameters of the dialect, unsupported ones and the model name.
void check_request_keys(const nlohmann::json& body, const std::string& served_model,
                        Dialect dialect);
// The sampling fields (resolve_generation_params(), openai_fields.h, with the model's
// defaults or nullptr), the seed and `stop`, into req.config and req.sources.
void parse_sampling(const nlohmann::json& body, const ModelLimits& model,
                    const detinfer::GenerationConfig* model_defaults, ServeRequest& req);
// stream and stream_options (after the sampling fields: streaming excludes beams).
void parse_stream(const nlohmann::json& body, ServeRequest& req);

// "fp_" + 16 hex digits derived from the model fingerprint, numerics mode and library
// version: equal fingerprints mean the same numbers for the same request.
std::string system_fingerprint(const detinfer::DeterministicSession& session);

struct ResponseContext {
  std::string id;
  std::int64_t created = 0;
  std::string model;
  std::string system_fingerprint;
};

// The non-streamed response body.
nlohmann::json completion_response(const ResponseContext& ctx, const CompletionRequest& req,
                                   const detinfer::GenerationResult& result,
                                   const detinfer::DeterministicSession& session,
                                   bool full_fingerprint);

// One server-sent-events chunk (without the "data: " framing).
nlohmann::json stream_chunk(const ResponseContext& ctx, std::int32_t index, const std::string& text,
                            const char* finish_reason,
                            nlohmann::json logprobs = nlohmann::json(nullptr));

// Unicode code points of UTF-8 text (OpenAI's text_offset counts the characters of a
// Python str); bytes of an incomplete sequence count as the one character they start.
std::size_t code_points(const std::string& utf8);

// OpenAI's legacy logprobs object {tokens, token_logprobs, top_logprobs, text_offset} for
// `steps`: `top_n` entries of each top list (0: empty objects), text offsets in code points
// from `offset`, which is advanced past the tokens. top_logprobs keys are the tokens'
// texts; an entry whose text is not valid UTF-8 or repeats an earlier key of the same
// step is keyed "token_id:<id>" (vLLM's spelling), so no entry is ever lost.
nlohmann::json logprobs_json(const std::vector<detinfer::StepLogprobs>& steps, std::int32_t top_n,
                             const detinfer::Tokenizer* tokenizer, std::size_t& offset);

// Per-choice state of a stream: the text offset so far and the logprobs of tokens whose
// text was held back (they ride with the next chunk that carries text).
struct StreamChoiceState {
  std::size_t offset = 0;
  std::vector<detinfer::StepLogprobs> pending;
};
nlohmann::json stream_text_chunk(const ResponseContext& ctx, std::int32_t index,
                                 const std::string& text, const CompletionRequest& req,
                                 StreamChoiceState& state,
                                 const detinfer::DeterministicSession& session);
// The last chunk of a choice: empty text (plus logprobs still pending), finish_reason and
// detinfer {seed, digest}.
nlohmann::json stream_final_chunk(const ResponseContext& ctx, std::int32_t index,
                                  const detinfer::GenerationResult& result,
                                  const CompletionRequest& req, StreamChoiceState& state,
                                  const detinfer::DeterministicSession& session);
// stream_options.include_usage: a chunk with empty choices and the usage totals.
nlohmann::json stream_usage_chunk(const ResponseContext& ctx,
                                  const detinfer::GenerationResult& result);

// Parses a request body: JSON text that is valid UTF-8, has no NUL byte, nests at most 64
// levels and has no number beyond a double (1e400). Throws ApiError (400) otherwise.
nlohmann::json parse_body(const std::string& text);

}  // namespace detinfer_cli
