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
  const std::vector<float> p = candidate_probs(c);
  const float u = philox_uniform(seed, stream, step, 0);
  float cum = 0.0f;
  std::size_t last = 0;
  for (DescendingWalk walk(p, c.ids); !walk.done();) {
    last = walk.next();
    cum = cum + p[last];
    if (cum > u) return last;
  }
  return last;  // the probabilities summed to <= u by rounding: the least likely token
}

std::vector<TokenLogprob> top_logprobs(const std::vector<float>& logprobs,
                                       const std::vector<std::int32_t>& ids, std::int32_t n) {
  std::vector<TokenLogprob> out;
  if (n <= 0) return out;
  // Partial selection keeps this cheap for a full vocabulary.
  std::vector<std::size_t> idx;
  idx.reserve(logprobs.size());
  for (std::size_t i = 0; i < logprobs.size(); ++i) {
    if (std::isfinite(logprobs[i])) idx.push_back(i);
  }
  const auto better = [&](std::size_t a, std::size_t b) {
    if (logprobs[a] != logprobs[b]) return logprobs[a] > logprobs[b];
    return ids[a] < ids[b];
  };
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(n), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  for (std::size_t j = 0; j < k; ++j) out.push_back({ids[idx[j]], logprobs[idx[j]]});
  return out;
}

TokenChoice choose_token(const GenerationConfig& config, const float* raw, std::int64_t vocab,
                         const std::vector<std::int32_t>& prompt,
                         const std::vector<std::int32_t>& generated, std::uint64_t seed,
                         std::uint32_t sample_index, std::uint64_t step,
                         const std::vector<std::uint8_t>* allowed) {
  TokenChoice choice;
  const auto apply_mask = [&](float* row) {
    if (allowed == nullptr) return;
    DETINFER_INTERNAL_CHECK(static_cast<std::int64_t>(allowed->size()) == vocab);
    for (std::int64_t i = 0; i < vocab; ++i) {
      if ((*allowed)[i] == 0) row[i] = -std::numeric_limits<float>::infinity();
    }
  };
  if (config.temperature == 0.0f) {
    // Greedy: the row is copied only when a penalty changes it, and the full
    // log-softmax is computed only when top logprobs are asked for (the chosen token's
    // logprob alone has the same bits).
    std::vector<float> penalized;
    const float* row = raw;
    if (has_penalties(config) || allowed != nullptr) {
      penalized.assign(raw, raw + vocab);
      apply_penalties(config, prompt, generated, penalized.data(), vocab);
      apply_mask(penalized.data());
      row = penalized.data();
    }
    choice.token = static_cast<std::int32_t>(kernels::argmax(row, vocab));
    if (config.logprobs <= 0) {
      choice.logprob = kernels::log_softmax_at(row, vocab, choice.token);
    } else {
      std::vector<float> lp(static_cast<std::size_t>(vocab));
      kernels::log_softmax(row, lp.data(), vocab);
      choice.logprob = lp[choice.token];
      std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab));
      for (std::int64_t i = 0; i < vocab; ++i) ids[i] = static_cast<std::int32_t>(i);
      choice.top = top_logprobs(lp, ids, config.logprobs);
    }
    return choice;
  }
  std::vector<float> row(raw, raw + vocab);
  apply_penalties(config, prompt, generated, row.data(), vocab);
  apply_mask(row.data());
  Candidates c = apply_warpers(config, row.data(), vocab);
  if (allowed != nullptr) {  // masked tokens have probability 0: not candidates at all
    Candidates kept;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if ((*allowed)[c.ids[i]] != 0) {
        kept.ids.push_back(c.ids[i]);
        kept.logits.push_back(c.logits[i]);
      }
    }
    c = std::move(kept);
  }
  const std::uint64_t stream = static_cast<std::uint64_t>(config.first_sample_index) + sample_index;
  const std::size_t i = draw_index(c, seed, stream, step);
  std::vector<float> lp(c.size());
  kernels::log_softmax(c.logits.data(), lp.data(), static_cast<std::int64_t>(c.size()));
  choice.token = c.ids[i];
  choice.logprob = lp[i];
  if (config.logprobs > 0) choice.top = top_logprobs(lp, c.ids, config.logprobs);
  return choice;
}

}  // namespace detinfer::decode
