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

struct CompletionRequest {
  detinfer::Prompt prompt{std::vector<std::int32_t>{}};
  std::string prompt_text;  // for echo: the text form of the prompt
  bool prompt_is_text = true;
  detinfer::GenerationConfig config;
  bool echo = false;
  bool stream = false;
  std::int32_t logprobs = 0;  // 0 = none
  bool logprobs_requested = false;
};

// Parses and validates a /v1/completions body. `served_model` is the name clients may
// pass as "model". Returns the request or the error to send.
struct ParseOutcome {
  std::optional<CompletionRequest> request;
  ApiError error;
};
ParseOutcome parse_completion_request(const std::string& body, const std::string& served_model,
                                      const detinfer::DeterministicSession& session);

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
                            const char* finish_reason);

}  // namespace detinfer_cli
