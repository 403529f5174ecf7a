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

// Steps 3-6 on a penalized row. Never returns an empty list.
Candidates apply_warpers(const GenerationConfig& config, const float* row, std::int64_t vocab);

// Canonical-softmax probabilities of the candidates (in their id order).
std::vector<float> candidate_probs(const Candidates& c);

// Walks positions of `values` in the stable order used by top_p and by the draw: value
// descending, then token id ascending (-0 and +0 are equal; ids are distinct). O(n) in the worst
// case and lazy: one pass buckets the positions by the high 11 bits of an order-preserving key of
// each value; a bucket is put in order (a two-pass LSD radix sort of the low 21 bits, or a
// comparison sort when it is small) only when the walk reaches it. A peaked distribution costs two
// passes over n, a flat one at most four; nothing sorts the whole vocabulary. (It replaces a binary
// heap that gave the same order for O(n + k log n), k log n being what a wide nucleus cost.)
class DescendingWalk {
 public:
  DescendingWalk(const std::vector<float>& values, const std::vector<std::int32_t>& ids);
  bool done() const { return pos_ == order_.size(); }
  std::size_t next();  // requires !done()

 private:
  void open_next_bucket();  // puts the next non-empty bucket in order
  const std::vector<std::int32_t>& ids_;
  std::vector<std::uint32_t> keys_;    // per position; ascending key = descending value
  std::vector<std::uint32_t> order_;   // positions grouped by bucket, each in id order
  std::vector<std::uint32_t> starts_;  // bucket b is order_[starts_[b], starts_[b + 1])
  std::size_t pos_ = 0;                // next index of order_ to hand out
  std::size_t ready_ = 0;              // order_[0, ready_) is in its final order
  std::size_t bucket_ = 0;             // the next bucket to open
};

}  // namespace detinfer::decode
