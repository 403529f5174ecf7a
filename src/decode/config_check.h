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
// contradicts another, with the allowed range. Fields that do not apply (top_k when
// greedy, length_penalty without beams) are ignored, as in Hugging Face.
void validate_config(const GenerationConfig& config, const ConfigLimits& limits);

// Limits that are not part of the model.
constexpr std::int32_t kMaxReturnSequences = 64;
constexpr std::int32_t kMaxBeams = 64;
constexpr std::int32_t kMaxLogprobs = 20;
constexpr std::size_t kMaxStopStrings = 16;
constexpr std::size_t kMaxStopStringBytes = 256;
constexpr std::size_t kMaxStopTokenIds = 64;

}  // namespace detinfer::decode
