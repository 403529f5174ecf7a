// A model's generation defaults from generation_config.json (docs/chat.md, "Generation
// defaults"), as vLLM's --generation-config auto: the fields the file sets replace
// detinfer's defaults; a request then overrides what it sets.
#pragma once

#include <string>
#include <vector>

#include "detinfer/generation.h"

namespace detinfer::chat {

struct GenerationDefaults {
  GenerationConfig config;          // detinfer's defaults with the file's fields applied
  std::vector<std::string> fields;  // the GenerationConfig fields the file set, in order
};

// Reads do_sample, temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens
// and max_length (eos_token_id is the model config's). do_sample false means greedy
// (temperature 0) whatever temperature says; do_sample true without a temperature means
// temperature 1 (transformers' default). max_length (prompt + new tokens in transformers)
// gives max_new_tokens when max_new_tokens is absent, capped at context_length - 1
// (0 = uncapped). Null fields are ignored. Throws Error(kCorrupt) naming `where` and the
// field for malformed JSON or a mistyped field; ranges are the session's to check.
GenerationDefaults parse_generation_defaults(const std::string& json_text, const std::string& where,
                                             std::int64_t context_length);

// <model_dir>/generation_config.json, or detinfer's defaults when there is none.
GenerationDefaults load_generation_defaults(const std::string& model_dir,
                                            std::int64_t context_length);

}  // namespace detinfer::chat
