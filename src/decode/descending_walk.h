// The stable descending order of top_p and of the draw (docs/sampling.md), walked lazily.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace detinfer::decode {

// Walks positions of `values` in the stable order used by top_p and by the draw: value
// descending, then token id ascending (-0 and +0 are equal; ids are distinct). O(n) in the worst
// case and lazy: one pass buckets the positions by the high 11 bits of an order-preserving key of
// each value; a bucket is put in order (a two-pass LSD radix sort of the low 21 bits, or a
// comparison sort when it is small) only when the walk reaches it. A peaked distribution costs two
// passes over n, a flat one at most four; nothing sorts the whole vocabulary. (It replaces a binary
// heap that gave the same order for O(n + k log n), k log n being what a wide nucleus cost.)
//
// Reusable: reset() starts a new walk over new values and keeps the buffers, which grow to the
// largest n seen and are never shrunk, so a walk per token allocates nothing once warm. The
// values and ids are read, not copied: they must outlive the walk.
class DescendingWalk {
 public:
  DescendingWalk() = default;
  DescendingWalk(const std::vector<float>& values, const std::vector<std::int32_t>& ids);
  // `ids` null: the id of position i is i.
  void reset(const float* values, const std::int32_t* ids, std::size_t n);
  bool done() const { return pos_ == n_; }
  std::size_t next();  // requires !done()

 private:
  void open_next_bucket();  // puts the next non-empty bucket in order
  void radix_pass(const std::uint32_t* in, std::uint32_t* out, std::size_t n, int shift,
                  std::uint32_t mask);
  std::int32_t id(std::uint32_t i) const {
    return ids_ == nullptr ? static_cast<std::int32_t>(i) : ids_[i];
  }
  const std::int32_t* ids_ = nullptr;
  std::size_t n_ = 0;
  std::vector<std::uint32_t> keys_;     // per position; ascending key = descending value
  std::vector<std::uint32_t> order_;    // positions grouped by bucket, each in id order
  std::vector<std::uint32_t> starts_;   // bucket b is order_[starts_[b], starts_[b + 1])
  std::vector<std::uint32_t> fill_;     // per lane and bucket: where reset() puts the next position
  std::vector<std::uint32_t> scratch_;  // a radix pass's output; positions by id
  std::vector<std::uint32_t> count_;    // a radix pass's digit counts
  std::size_t pos_ = 0;                 // next index of order_ to hand out
  std::size_t ready_ = 0;               // order_[0, ready_) is in its final order
  std::size_t bucket_ = 0;              // the next bucket to open
};

// Ascending keys for descending values: the IEEE bits made order-preserving as unsigned,
// then complemented. -0 is folded onto +0 so that the two compare equal, as floats do.
std::uint32_t descending_key(float v);

// The k-th largest of x[0, n) (1 <= k <= n; std::greater<float> order, counting equal values
// separately: what std::nth_element(..., k - 1, greater) leaves at k - 1), for rows without
// NaN. Small k: a min-heap of the k largest (one compare per value); larger k, O(n): a
// histogram of the keys' high 11 bits, then nth_element over the one bucket that holds it.
// `scratch` is grown to at most n floats.
float kth_largest(const float* x, std::size_t n, std::size_t k, std::vector<float>& scratch);

// v.data() after growing v to at least n elements (never shrinking it).
template <class T>
T* grown(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace detinfer::decode
