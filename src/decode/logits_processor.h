// Logits processors, applied in the fixed order of docs/sampling.md:
//   1. repetition_penalty  (Hugging Face; over prompt + generated tokens)
//   2. presence_penalty, frequency_penalty  (OpenAI; over generated tokens)
//   3. temperature
//   4. top_k   5. top_p   6. min_p
// Steps 1-2 edit a full vocabulary row in place; steps 3-6 (the "warpers", used only
// when sampling) shrink it to a candidate list.
#pragma once

#include <cstdint>
#include <vector>

#include "detinfer/generation.h"

namespace detinfer::decode {

// Steps 1 and 2 on `row` (vocab floats). `prompt` and `generated` are the token ids of
// the sequence so far; ids outside [0, vocab) are ignored.
void apply_penalties(const GenerationConfig& config, const std::vector<std::int32_t>& prompt,
                     const std::vector<std::int32_t>& generated, float* row, std::int64_t vocab);
// False when apply_penalties leaves every row unchanged (no penalty is set).
bool has_penalties(const GenerationConfig& config);

// Surviving tokens and their (processed) logits, in ascending token id order.
struct Candidates {
  std::vector<std::int32_t> ids;
  std::vector<float> logits;
  std::size_t size() const { return ids.size(); }
};

// Steps 3-6 on a penalized row. Never returns an empty list. (A copy out of a
// SamplingWorkspace, sampling_workspace.h, which choose_token uses without the copy.)
Candidates apply_warpers(const GenerationConfig& config, const float* row, std::int64_t vocab);

// Canonical-softmax probabilities of the candidates (in their id order).
std::vector<float> candidate_probs(const Candidates& c);

}  // namespace detinfer::decode
