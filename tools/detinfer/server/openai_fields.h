// OpenAI request parameters <-> GenerationConfig fields. The server reads a request's
// sampling parameters through the library's field table (core/generation_fields.h): a
// parameter's name is the field's table key unless OpenAI spells it otherwise
// (max_tokens, n, stop), its JSON type follows the member's type and its range is the
// table's. Errors name the OpenAI parameter.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "detinfer/generation.h"

namespace detinfer_cli {

struct ModelLimits;

// The OpenAI parameter of a GenerationConfig field ("max_new_tokens" -> "max_tokens",
// "num_return_sequences" -> "n", "stop_strings" -> "stop"); any other name unchanged.
std::string openai_param(const std::string& field);

// Whether `key` is a GenerationConfig field a request may carry (by its OpenAI name).
bool is_generation_param(const std::string& key);

// Reads the plain (number and boolean) fields present in `body` into `c` and checks
// their JSON types and ranges; a field absent from `body` keeps its value in `c`. The
// seed, `stop` and `logprobs` have wire forms of their own and are read by the caller.
// Throws ApiError (400) naming the parameter.
void read_generation_params(const nlohmann::json& body, const ModelLimits& model,
                            detinfer::GenerationConfig& c);

// The GenerationConfig a request starts from: GenerationConfig's defaults except where
// OpenAI's differ (max_tokens 16, temperature 1).
detinfer::GenerationConfig openai_defaults();

// Writes into `body`, by its OpenAI name, every plain (number or boolean) parameter that
// `body` lacks (or has as null) and whose value in `defaults` differs from
// openai_defaults(): a request parsed from the result then starts from `defaults` instead
// (the chat endpoint's model defaults, DeterministicSession::default_generation_config()).
// The parameters read apart (seed, stop, logprobs) are left alone.
void add_default_params(nlohmann::json& body, const detinfer::GenerationConfig& defaults);

}  // namespace detinfer_cli
