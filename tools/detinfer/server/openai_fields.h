// OpenAI request parameters <-> GenerationConfig fields. The server reads a request's
// sampling parameters through the library's field table (core/generation_fields.h): a
// parameter's name is the field's table key unless OpenAI spells it otherwise
// (max_tokens, n, stop), its JSON type follows the member's type and its range is the
// table's. Errors name the OpenAI parameter.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "detinfer/generation.h"
#include "serve_request.h"

namespace detinfer_cli {

struct ModelLimits;

// The OpenAI parameter of a GenerationConfig field ("max_new_tokens" -> "max_tokens",
// "num_return_sequences" -> "n", "stop_strings" -> "stop"); any other name unchanged.
std::string openai_param(const std::string& field);

// Whether `key` is a GenerationConfig field a request may carry (by its OpenAI name).
bool is_generation_param(const std::string& key);

// The request parameter a detinfer::Error field (or a parser's field) names, in the
// request's dialect and spelling: the one place that maps library names to OpenAI's.
// openai_param() first; then "max_tokens" as the client spelled it
// (max_completion_tokens), and for chat "prompt" -> "messages", "logprobs" ->
// "top_logprobs", the chat template's fields -> "messages" / "chat_template_kwargs".
std::string request_param(const std::string& field, const ParamNames& names);

// The GenerationConfig a request starts from: GenerationConfig's defaults except where
// OpenAI's differ (max_tokens 16, temperature 1).
detinfer::GenerationConfig openai_defaults();

// The one resolution of a request's plain (number and boolean) sampling fields: the
// client's value (read from `body` by its request_param() name, JSON type and range
// checked), else the model's default from `model_defaults` (chat: generation_config.json;
// nullptr for none), else openai_defaults(). Writes `c` and where each field came from.
// The seed, `stop` and `logprobs` have wire forms of their own and are read by the
// caller. Throws ApiError (400) naming the parameter.
void resolve_generation_params(const nlohmann::json& body, const ModelLimits& model,
                               const detinfer::GenerationConfig* model_defaults,
                               const ParamNames& names, detinfer::GenerationConfig& c,
                               FieldSources& sources);

}  // namespace detinfer_cli
