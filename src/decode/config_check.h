// Validation of a GenerationConfig against a model's limits.
#pragma once

#include <cstdint>

#include "detinfer/generation.h"

namespace detinfer::decode {

struct ConfigLimits {
  std::int64_t vocab_size = 0;      // token ids must be in [0, vocab_size)
  std::int64_t context_length = 0;  // max_new_tokens upper bound; 0 = unchecked
};

// Throws Error(kInvalidArgument) naming the first field that is out of range or
// contradicts another, with the allowed range; Error::field() is the field's JSON key
// ("temperature"). Ranges come from the field table (core/generation_fields.h). Fields that do not
// apply (top_k when greedy, length_penalty without beams) are ignored, as in Hugging Face.
void validate_config(const GenerationConfig& config, const ConfigLimits& limits);

}  // namespace detinfer::decode
