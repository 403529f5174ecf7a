#include "decode/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "detinfer/philox.h"
#include "kernels/kernels.h"

namespace detinfer::decode {

std::size_t draw_index(const Candidates& c, std::uint64_t seed, std::uint64_t stream,
                       std::uint64_t step) {
  DETINFER_INTERNAL_CHECK(c.size() > 0);
  SamplingWorkspace ws;
  ws.load(c);
  return ws.draw(seed, stream, step);
}

std::vector<TokenLogprob> top_logprobs(const std::vector<float>& logprobs,
                                       const std::vector<std::int32_t>& ids, std::int32_t n) {
  DETINFER_INTERNAL_CHECK(ids.size() == logprobs.size());
  return select_top_logprobs(logprobs.size(), ids.data(), n,
                             [&logprobs](std::size_t i) { return logprobs[i]; });
}

TokenChoice choose_token(const GenerationConfig& config, const float* raw, std::int64_t vocab,
                         const std::vector<std::int32_t>& prompt,
                         const std::vector<std::int32_t>& generated, std::uint64_t seed,
                         std::uint32_t sample_index, std::uint64_t step, SamplingWorkspace& ws,
                         const std::vector<std::uint8_t>* allowed, LogprobNeed logprob) {
  DETINFER_INTERNAL_CHECK(vocab > 0);
  const auto n = static_cast<std::size_t>(vocab);
  // The row is copied only when a penalty or the mask changes it (a temperature divides
  // into the workspace without a copy first).
  const float* row = raw;
  if (has_penalties(config) || allowed != nullptr) {
    float* own = ws.row_buffer(n);
    std::copy(raw, raw + vocab, own);
    apply_penalties(config, prompt, generated, own, vocab);
    if (allowed != nullptr) {
      DETINFER_INTERNAL_CHECK(allowed->size() == n);
      for (std::size_t i = 0; i < n; ++i) {
        if ((*allowed)[i] == 0) own[i] = -std::numeric_limits<float>::infinity();
      }
    }
    row = own;
  }
  ws.load(row, n);
  TokenChoice choice;
  std::size_t i = 0;
  if (config.temperature == 0.0f) {
    // Greedy: argmax of the penalized row, ties to the lowest id; its logprob (and the top
    // ones) from the row's log-softmax normalizer, never written out as a row.
    i = static_cast<std::size_t>(kernels::argmax(row, vocab));
    if (logprob == LogprobNeed::kSkip && config.logprobs == 0) return {ws.id(i), 0.0f, {}};
    ws.normalize();
  } else {
    ws.warp(config, allowed);
    const std::uint64_t stream =
        static_cast<std::uint64_t>(config.first_sample_index) + sample_index;
    i = ws.draw(seed, stream, step);
  }
  choice.token = ws.id(i);
  choice.logprob = ws.logprob(i);
  if (config.logprobs > 0) choice.top = ws.top(config.logprobs);
  return choice;
}

TokenChoice choose_token(const GenerationConfig& config, const float* raw, std::int64_t vocab,
                         const std::vector<std::int32_t>& prompt,
                         const std::vector<std::int32_t>& generated, std::uint64_t seed,
                         std::uint32_t sample_index, std::uint64_t step,
                         const std::vector<std::uint8_t>* allowed) {
  SamplingWorkspace ws;
  return choose_token(config, raw, vocab, prompt, generated, seed, sample_index, step, ws, allowed);
}

}  // namespace detinfer::decode
