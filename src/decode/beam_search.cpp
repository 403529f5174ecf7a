#include "decode/beam_search.h"

#include <algorithm>

#include "core/check.h"
#include "decode/logits_processor.h"
#include "decode/sampler.h"
#include "kernels/kernels.h"

namespace detinfer::decode {

namespace {
struct Candidate {
  float score;
  std::int32_t token;
  int beam;
};

bool better(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.token != b.token) return a.token < b.token;
  return a.beam < b.beam;
}
}  // namespace

BeamSearch::BeamSearch(const GenerationConfig& config, std::vector<std::int32_t> eos_ids,
                       std::int64_t vocab)
    : config_(config), eos_ids_(std::move(eos_ids)), vocab_(vocab) {
  beams_.emplace_back();
}

float BeamSearch::length_power(std::int64_t length, float length_penalty) {
  const float len = static_cast<float>(std::max<std::int64_t>(length, 1));
  if (length_penalty == 0.0f) return 1.0f;
  if (length_penalty == 1.0f) return len;
  return kernels::exp_f32(length_penalty * kernels::log_f32(len));
}

void BeamSearch::add_hypothesis(Beam beam, float sum_logprobs, std::int64_t generated_len,
                                bool eos) {
  const float score = sum_logprobs / length_power(generated_len, config_.length_penalty);
  const auto nb = static_cast<std::size_t>(config_.num_beams);
  if (hyps_.size() < nb || score > worst_score_) {
    hyps_.push_back({std::move(beam), score, eos});
    if (hyps_.size() > nb) {
      // HF: sorted((score, index)) -> drop the first, the second becomes the worst.
      std::vector<std::pair<float, std::size_t>> sorted;
      for (std::size_t i = 0; i < hyps_.size(); ++i) sorted.emplace_back(hyps_[i].score, i);
      std::sort(sorted.begin(), sorted.end());
      hyps_.erase(hyps_.begin() + static_cast<std::ptrdiff_t>(sorted[0].second));
      worst_score_ = sorted[1].first;
    } else {
      worst_score_ = std::min(score, worst_score_);
    }
  }
}

bool BeamSearch::is_done(float best_sum_logprobs, std::int64_t cur_len) const {
  if (hyps_.size() < static_cast<std::size_t>(config_.num_beams)) return false;
  if (config_.early_stopping) return true;
  const float highest = best_sum_logprobs / length_power(cur_len, config_.length_penalty);
  return worst_score_ >= highest;
}

std::vector<int> BeamSearch::step(const std::vector<const float*>& rows,
                                  const std::vector<std::uint64_t>& digests,
                                  const std::vector<std::int32_t>& prompt) {
  if (done_) return {};
  DETINFER_INTERNAL_CHECK(rows.size() == beams_.size() && digests.size() == beams_.size());
  const std::size_t k =
      static_cast<std::size_t>(std::max<std::size_t>(2, 1 + eos_ids_.size()) * config_.num_beams);
  std::vector<std::vector<float>> lps(beams_.size());
  std::vector<Candidate> cands;
  for (std::size_t b = 0; b < beams_.size(); ++b) {
    std::vector<float>& lp = lps[b];
    lp.resize(static_cast<std::size_t>(vocab_));
    kernels::log_softmax(rows[b], lp.data(), vocab_);
    apply_penalties(config_, prompt, beams_[b].tokens, lp.data(), vocab_);
    std::vector<Candidate> mine(static_cast<std::size_t>(vocab_));
    for (std::int64_t t = 0; t < vocab_; ++t) {
      mine[t] = {lp[t] + beams_[b].sum_logprobs, static_cast<std::int32_t>(t), static_cast<int>(b)};
    }
    const std::size_t keep = std::min(k, mine.size());
    std::partial_sort(mine.begin(), mine.begin() + keep, mine.end(), better);
    cands.insert(cands.end(), mine.begin(), mine.begin() + keep);
  }
  std::sort(cands.begin(), cands.end(), better);
  if (cands.size() > k) cands.resize(k);

  const auto step_of = [&](const Candidate& c) {
    StepLogprobs s;
    s.token = c.token;
    s.logprob = lps[c.beam][c.token];
    if (config_.logprobs > 0) {
      std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab_));
      for (std::int64_t i = 0; i < vocab_; ++i) ids[i] = static_cast<std::int32_t>(i);
      s.top = top_logprobs(lps[c.beam], ids, config_.logprobs);
    }
    return s;
  };
  const auto extend = [&](const Candidate& c) {
    Beam nb = beams_[c.beam];
    nb.tokens.push_back(c.token);
    nb.sum_logprobs = c.score;
    nb.logprobs.push_back(step_of(c));
    nb.step_digests.push_back(digests[c.beam]);
    return nb;
  };

  std::vector<Beam> next;
  std::vector<int> parents;
  for (std::size_t rank = 0; rank < cands.size(); ++rank) {
    const Candidate& c = cands[rank];
    const bool is_eos = std::find(eos_ids_.begin(), eos_ids_.end(), c.token) != eos_ids_.end();
    if (is_eos) {
      if (rank >= static_cast<std::size_t>(config_.num_beams)) continue;
      add_hypothesis(extend(c), c.score, length_, true);
    } else {
      next.push_back(extend(c));
      parents.push_back(c.beam);
    }
    if (next.size() == static_cast<std::size_t>(config_.num_beams)) break;
  }
  done_ = is_done(cands.front().score, length_);
  beams_ = std::move(next);
  ++length_;
  if (done_) parents.clear();
  return parents;
}

std::vector<BeamSearch::Hypothesis> BeamSearch::finalize() {
  if (!done_) {
    for (Beam& b : beams_) {
      const float s = b.sum_logprobs;
      add_hypothesis(b, s, static_cast<std::int64_t>(b.tokens.size()), false);
    }
    done_ = true;
  }
  // HF: stable sort ascending by score, pop from the back (ties: later insertion first).
  std::vector<std::size_t> order(hyps_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return hyps_[a].score < hyps_[b].score; });
  std::vector<Hypothesis> out;
  for (std::size_t j = 0;
       j < static_cast<std::size_t>(config_.num_return_sequences) && j < order.size(); ++j) {
    out.push_back(hyps_[order[order.size() - 1 - j]]);
  }
  return out;
}

}  // namespace detinfer::decode
