// Token choice for one step of one sample: greedy or a seeded draw (docs/sampling.md).
#pragma once

#include <cstdint>
#include <vector>

#include "decode/logits_processor.h"
#include "decode/sampling_workspace.h"
#include "detinfer/generation.h"

namespace detinfer::decode {

// The inverse-CDF draw over a processed candidate list: a pure function of
// (candidates, seed, stream, step). Returns an index into `c`.
//   p     = softmax(c.logits) (canonical kernel, candidates in id order)
//   order = positions by p descending, then token id ascending
//   u     = philox_uniform(seed, stream, step, lane 0)
//   pick the first order[j] whose running fp32 sum p[order[0]] + ... + p[order[j]]
//   is > u; when none is (the sum rounded below u), the last of order.
std::size_t draw_index(const Candidates& c, std::uint64_t seed, std::uint64_t stream,
                       std::uint64_t step);

// Top-`n` (token, logprob) of a log-probability list over `ids`, sorted by logprob
// descending then token id ascending; -inf entries are never listed.
std::vector<TokenLogprob> top_logprobs(const std::vector<float>& logprobs,
                                       const std::vector<std::int32_t>& ids, std::int32_t n);

struct TokenChoice {
  std::int32_t token = 0;
  float logprob = 0.0f;           // under the processed distribution
  std::vector<TokenLogprob> top;  // config.logprobs entries (empty when 0)
};

// Processes `raw` (vocab logits of this step; not modified) with the history of this
// sample and picks its token. Greedy (temperature 0): argmax of the penalized row, ties
// to the lowest id, logprob from log_softmax of the penalized row. Sampling: the
// warpers, then draw_index with stream = first_sample_index + sample_index.
// `ws` holds the buffers (reused across calls; see SamplingWorkspace): without top logprobs
// a warm call allocates nothing, and no vocabulary-sized work is done that the choice and
// its logprob do not need (the row is copied only when a penalty, the mask or the
// temperature changes it; log-probabilities are never written out as a row).
// `allowed` (constrained decoding; null = every token): a token with allowed[id] == 0 has
// its penalized logit set to -inf before the greedy choice or the warpers, and never
// survives as a candidate of the draw. At least one token must be allowed.
// `logprob` kSkip (verification: only the token matters) leaves TokenChoice::logprob 0 and
// spares greedy choices the log-softmax normalizer, a pass over the vocabulary; the token
// is the same either way (sampling computes it while warping and ignores kSkip).
enum class LogprobNeed : std::uint8_t { kCompute, kSkip };
TokenChoice choose_token(const GenerationConfig& config, const float* raw, std::int64_t vocab,
                         const std::vector<std::int32_t>& prompt,
                         const std::vector<std::int32_t>& generated, std::uint64_t seed,
                         std::uint32_t sample_index, std::uint64_t step, SamplingWorkspace& ws,
                         const std::vector<std::uint8_t>* allowed = nullptr,
                         LogprobNeed logprob = LogprobNeed::kCompute);
// The same with a workspace of its own (allocates per call; tests and one-off callers).
TokenChoice choose_token(const GenerationConfig& config, const float* raw, std::int64_t vocab,
                         const std::vector<std::int32_t>& prompt,
                         const std::vector<std::int32_t>& generated, std::uint64_t seed,
                         std::uint32_t sample_index, std::uint64_t step,
                         const std::vector<std::uint8_t>* allowed = nullptr);

}  // namespace detinfer::decode
