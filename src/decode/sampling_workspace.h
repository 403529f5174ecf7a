// The buffers of one token choice, reused from token to token (issue 33, item 5), and the
// warpers and the draw written over them (docs/sampling.md). choose_token is the client.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "decode/descending_walk.h"
#include "decode/logits_processor.h"
#include "detinfer/generation.h"
#include "kernels/kernels.h"

namespace detinfer::decode {

// The top `count` (token, logprob) of the n log-probabilities lp(i) of tokens ids[i] (ids
// null: id = i), sorted by logprob descending then token id ascending; entries that are not
// finite are never listed. A bounded heap: O(n log count), no buffer of n.
template <class LogprobAt>
std::vector<TokenLogprob> select_top_logprobs(std::size_t n, const std::int32_t* ids,
                                              std::int32_t count, LogprobAt lp) {
  std::vector<TokenLogprob> best;
  if (count <= 0) return best;
  const auto k = static_cast<std::size_t>(count);
  best.reserve(k + 1);
  // `better` as the heap's "less": the front is the worst kept entry.
  const auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob != b.logprob ? a.logprob > b.logprob : a.token < b.token;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const TokenLogprob e{ids == nullptr ? static_cast<std::int32_t>(i) : ids[i], lp(i)};
    if (!std::isfinite(e.logprob)) continue;
    if (best.size() == k && !better(e, best.front())) continue;
    best.push_back(e);
    std::push_heap(best.begin(), best.end(), better);
    if (best.size() > k) {
      std::pop_heap(best.begin(), best.end(), better);
      best.pop_back();
    }
  }
  std::sort_heap(best.begin(), best.end(), better);
  return best;
}

// One per thread that chooses tokens (the engine's scheduler thread, a verifier), never
// used by two threads at once. Its buffers grow to the largest vocabulary seen and are
// kept, so that a token choice allocates nothing once warm; it holds no state that
// changes a result: every call starts from load(), and any vocabulary size or mode may
// follow any other (tests/decode/selection_oracle_test.cpp).
//
// The candidates are a view: after load() the caller's row itself (ids implicit: id =
// position, nothing copied); the first filter that runs compacts them into the
// workspace, in ascending id order.
class SamplingWorkspace {
 public:
  // A vocabulary-sized buffer for the caller's penalized copy of a row; load() may be
  // given it (the temperature then divides it in place).
  float* row_buffer(std::size_t n) { return grown(row_, n); }
  // Every position of `logits` (n > 0 floats, read until the next load) is a candidate.
  void load(const float* logits, std::size_t n);
  // The external candidate list `c` (read until the next load), e.g. for draw_index.
  void load(const Candidates& c);
  // Steps 3-6 of docs/sampling.md on the loaded row, then, with `allowed`, drops the
  // candidates whose allowed[id] is 0. Same candidates, bit for bit, as apply_warpers.
  void warp(const GenerationConfig& config, const std::vector<std::uint8_t>* allowed);
  // draw_index over the candidates: an index into them.
  std::size_t draw(std::uint64_t seed, std::uint64_t stream, std::uint64_t step);
  // The softmax normalizer of the candidates (draw() computes it too).
  void normalize();
  // After normalize() or draw(): log_softmax(candidate logits)[i], and the top `count`
  // (token, logprob) of that list as top_logprobs gives them, both bit for bit.
  float logprob(std::size_t i) const;
  std::vector<TokenLogprob> top(std::int32_t count) const;

  std::size_t size() const { return n_; }
  std::int32_t id(std::size_t i) const {
    return ids_ == nullptr ? static_cast<std::int32_t>(i) : ids_[i];
  }
  Candidates candidates() const;  // a copy

 private:
  void probabilities();  // probs_ = softmax of the candidates, unless still current
  void top_k(std::int32_t k);
  void top_p(float p);
  void min_p(float p);
  template <class Keep>
  void compact(Keep keep);  // keeps candidate i where keep(i), in order

  const float* logits_ = nullptr;
  const std::int32_t* ids_ = nullptr;  // null: id = position
  std::size_t n_ = 0;
  kernels::SoftmaxNorm norm_;
  bool norm_current_ = false;   // norm_ is that of the current candidates
  bool probs_current_ = false;  // probs_ holds their softmax
  std::vector<float> row_;      // the caller's penalized copy, and the tempered row
  std::vector<float> logits_buf_;
  std::vector<std::int32_t> ids_buf_;
  std::vector<float> probs_;   // exp(x - max) after normalize(), softmax after probabilities()
  std::vector<float> select_;  // top_k's bucket
  std::vector<char> keep_;     // top_p's nucleus
  DescendingWalk walk_;
};

}  // namespace detinfer::decode
