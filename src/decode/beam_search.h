// Beam search with Hugging Face semantics (transformers' BeamSearchScorer and
// BeamHypotheses), for one request. docs/sampling.md gives the exact rules.
//
// Each step, for every live beam b: lp_b = penalties(log_softmax(logits_b)) and candidate
// scores lp_b[t] + score_b (fp32). The K = max(2, 1 + #eos) * num_beams best candidates,
// ordered by score desc, token id asc, beam index asc, are walked in order: an eos
// candidate of rank < num_beams becomes a finished hypothesis scored
// sum_logprobs / generated_len^length_penalty; other candidates become the next beams
// until num_beams are taken.
#pragma once

#include <cstdint>
#include <vector>

#include "detinfer/generation.h"

namespace detinfer::decode {

class BeamSearch {
 public:
  struct Beam {
    std::vector<std::int32_t> tokens;  // generated tokens (finished ones end with eos)
    float sum_logprobs = 0.0f;         // HF's beam score
    std::vector<StepLogprobs> logprobs;
    std::vector<std::uint64_t> step_digests;
  };
  struct Hypothesis {
    Beam beam;
    float score = 0.0f;  // sum_logprobs / generated_len^length_penalty
    bool eos = false;    // finished by an eos token (else by max_new_tokens)
  };

  // `eos_ids`: tokens that finish a hypothesis. Starts with one empty live beam.
  BeamSearch(const GenerationConfig& config, std::vector<std::int32_t> eos_ids, std::int64_t vocab);

  const std::vector<Beam>& beams() const { return beams_; }
  bool done() const { return done_; }
  // Generated tokens per live beam so far.
  std::int64_t length() const { return length_; }

  // One step. rows[b] = raw logits (vocab floats) of live beam b, digests[b] their
  // digest. Returns, for each new live beam, the index of its parent in the previous
  // live list (the engine forks the KV state accordingly). Empty when done.
  std::vector<int> step(const std::vector<const float*>& rows,
                        const std::vector<std::uint64_t>& digests,
                        const std::vector<std::int32_t>& prompt);

  // The num_return_sequences best hypotheses, best first. When the search is not done
  // (max_new_tokens reached) the live beams are added first, as in HF.
  std::vector<Hypothesis> finalize();

  // length^length_penalty with detinfer's exp/log: 1 for lp = 0, length for lp = 1,
  // else exp_f32(lp * log_f32(length)); length is clamped to >= 1.
  static float length_power(std::int64_t length, float length_penalty);

 private:
  void add_hypothesis(Beam beam, float sum_logprobs, std::int64_t generated_len, bool eos);
  bool is_done(float best_sum_logprobs, std::int64_t cur_len) const;

  GenerationConfig config_;
  std::vector<std::int32_t> eos_ids_;
  std::int64_t vocab_;
  std::vector<Beam> beams_;
  std::vector<Hypothesis> hyps_;  // insertion order, as HF's list
  float worst_score_ = 1e9f;
  std::int64_t length_ = 0;
  bool done_ = false;
};

}  // namespace detinfer::decode
