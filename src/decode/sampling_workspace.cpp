#include "decode/sampling_workspace.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "detinfer/philox.h"

namespace detinfer::decode {

void SamplingWorkspace::load(const float* logits, std::size_t n) {
  DETINFER_INTERNAL_CHECK(n > 0);
  logits_ = logits;
  ids_ = nullptr;
  n_ = n;
  norm_current_ = false;
  probs_current_ = false;
}

void SamplingWorkspace::load(const Candidates& c) {
  DETINFER_INTERNAL_CHECK(c.size() > 0 && c.logits.size() == c.size());
  logits_ = c.logits.data();
  ids_ = c.ids.data();
  n_ = c.size();
  norm_current_ = false;
  probs_current_ = false;
}

template <class Keep>
void SamplingWorkspace::compact(Keep keep) {
  // In place once the candidates are the workspace's own (a write never passes a read).
  std::int32_t* ids = grown(ids_buf_, n_);
  float* logits = grown(logits_buf_, n_);
  std::size_t m = 0;
  for (std::size_t i = 0; i < n_; ++i) {  // branch-free: what is kept is unpredictable
    ids[m] = id(i);
    logits[m] = logits_[i];
    m += keep(i) ? 1 : 0;
  }
  if (m != n_) {  // positions moved: the normalizer and probabilities are stale
    norm_current_ = false;
    probs_current_ = false;
  }
  ids_ = ids;
  logits_ = logits;
  n_ = m;
}

void SamplingWorkspace::normalize() {
  if (norm_current_) return;
  norm_ = kernels::softmax_norm(logits_, grown(probs_, n_), static_cast<std::int64_t>(n_));
  norm_current_ = true;
  probs_current_ = false;
}

void SamplingWorkspace::probabilities() {
  if (probs_current_) return;
  normalize();
  // kernels::softmax's last step over softmax_norm's exponentials: the same bits.
  float* p = probs_.data();
  for (std::size_t i = 0; i < n_; ++i) p[i] = p[i] / norm_.sum;
  probs_current_ = true;
}

void SamplingWorkspace::warp(const GenerationConfig& config,
                             const std::vector<std::uint8_t>* allowed) {
  const float t = config.temperature;
  if (t != 1.0f) {
    float* tempered = grown(row_, n_);  // may be the row itself: elementwise in place
    for (std::size_t i = 0; i < n_; ++i) tempered[i] = logits_[i] / t;
    logits_ = tempered;
    norm_current_ = false;
    probs_current_ = false;
  }
  if (config.top_k > 0 && static_cast<std::size_t>(config.top_k) < n_) top_k(config.top_k);
  if (config.top_p < 1.0f && n_ > 1) top_p(config.top_p);
  if (config.min_p > 0.0f && n_ > 1) min_p(config.min_p);
  if (allowed != nullptr) {  // masked tokens have probability 0: not candidates at all
    compact([&](std::size_t i) { return (*allowed)[static_cast<std::size_t>(id(i))] != 0; });
  }
}

// top_k: keep logits >= the k-th largest (ties at the threshold are kept, as in HF).
void SamplingWorkspace::top_k(std::int32_t k) {
  const float threshold = kth_largest(logits_, n_, static_cast<std::size_t>(k), select_);
  const float* x = logits_;
  compact([x, threshold](std::size_t i) { return x[i] >= threshold; });
}

// top_p: the smallest prefix of the stable descending order whose sequential fp32
// cumulative probability reaches top_p.
void SamplingWorkspace::top_p(float top) {
  probabilities();
  const float* p = probs_.data();
  char* keep = grown(keep_, n_);
  std::memset(keep, 0, n_);
  float cum = 0.0f;
  for (walk_.reset(p, ids_, n_); !walk_.done();) {
    const std::size_t i = walk_.next();
    keep[i] = 1;
    cum = cum + p[i];
    if (cum >= top) break;
  }
  compact([keep](std::size_t i) { return keep[i] != 0; });
}

// min_p: keep p >= min_p * max(p).
void SamplingWorkspace::min_p(float min) {
  probabilities();
  const float* p = probs_.data();
  const float threshold = min * *std::max_element(p, p + n_);
  compact([p, threshold](std::size_t i) { return p[i] >= threshold; });
}

std::size_t SamplingWorkspace::draw(std::uint64_t seed, std::uint64_t stream, std::uint64_t step) {
  DETINFER_INTERNAL_CHECK(n_ > 0);
  probabilities();
  const float* p = probs_.data();
  const float u = philox_uniform(seed, stream, step, 0);
  float cum = 0.0f;
  std::size_t last = 0;
  for (walk_.reset(p, ids_, n_); !walk_.done();) {
    last = walk_.next();
    cum = cum + p[last];
    if (cum > u) return last;
  }
  return last;  // the probabilities summed to <= u by rounding: the least likely token
}

float SamplingWorkspace::logprob(std::size_t i) const {
  DETINFER_INTERNAL_CHECK(norm_current_ && i < n_);
  return (logits_[i] - norm_.max) - norm_.log_sum;  // kernels::log_softmax's expression
}

std::vector<TokenLogprob> SamplingWorkspace::top(std::int32_t count) const {
  DETINFER_INTERNAL_CHECK(norm_current_);
  const float* x = logits_;
  const kernels::SoftmaxNorm norm = norm_;
  return select_top_logprobs(n_, ids_, count,
                             [x, norm](std::size_t i) { return (x[i] - norm.max) - norm.log_sum; });
}

Candidates SamplingWorkspace::candidates() const {
  Candidates c;
  c.logits.assign(logits_, logits_ + n_);
  c.ids.resize(n_);
  for (std::size_t i = 0; i < n_; ++i) c.ids[i] = id(i);
  return c;
}

}  // namespace detinfer::decode
