#include "decode/descending_walk.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace detinfer::decode {

namespace {
constexpr int kLowBits = 21;                            // sorted within a bucket
constexpr std::size_t kBuckets = std::size_t{1} << 11;  // by the high 11 bits
constexpr std::size_t kSmallBucket = 64;                // comparison-sorted up to this size
constexpr std::size_t kHeapSelect = 256;                // kth_largest by a heap up to this k
constexpr std::size_t kLanes = 4;                       // independent counters per bucket
}  // namespace

std::uint32_t descending_key(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  b = b == 0x80000000u ? 0 : b;
  // Negative: all bits flipped; otherwise the sign bit set. Branch-free: a row's signs are
  // random, and a branch on them mispredicts half the time.
  const std::uint32_t flip = static_cast<std::uint32_t>(static_cast<std::int32_t>(b) >> 31);
  const std::uint32_t ascending = b ^ (flip | 0x80000000u);
  return ~ascending;
}

DescendingWalk::DescendingWalk(const std::vector<float>& values,
                               const std::vector<std::int32_t>& ids) {
  DETINFER_INTERNAL_CHECK(ids.size() == values.size());
  reset(values.data(), ids.data(), values.size());
}

void DescendingWalk::reset(const float* values, const std::int32_t* ids, std::size_t n) {
  DETINFER_INTERNAL_CHECK(n <= std::numeric_limits<std::uint32_t>::max());
  ids_ = ids;
  n_ = n;
  pos_ = 0;
  ready_ = 0;
  bucket_ = 0;
  std::uint32_t* keys = grown(keys_, n);
  std::uint32_t* order = grown(order_, n);
  // kLanes quarters of the positions, interleaved: a row's keys crowd into a few buckets,
  // and one counter per bucket would make every increment wait for the previous one.
  const std::size_t q = (n + kLanes - 1) / kLanes;
  const auto lanes = [q, n](auto&& f) {
    for (std::size_t i = 0; i < q; ++i) {
      for (std::size_t l = 0; l < kLanes; ++l) {
        if (l * q + i < n) f(l, l * q + i);
      }
    }
  };
  fill_.assign(kLanes * kBuckets, 0);
  std::uint32_t* fill = fill_.data();
  lanes([&](std::size_t l, std::size_t j) {
    keys[j] = descending_key(values[j]);
    ++fill[l * kBuckets + (keys[j] >> kLowBits)];
  });
  // Lane l of bucket b starts after the bucket's earlier lanes: position order in a bucket.
  starts_.assign(kBuckets + 1, 0);
  for (std::size_t b = 0; b < kBuckets; ++b) {
    std::uint32_t at = starts_[b];
    for (std::size_t l = 0; l < kLanes; ++l) {
      const std::uint32_t c = fill[l * kBuckets + b];
      fill[l * kBuckets + b] = at;
      at += c;
    }
    starts_[b + 1] = at;
  }
  // Buckets are filled in id order, which the stable passes keep among equal keys.
  // Candidates come in id order; any other list pays for one sort by id here.
  if (ids == nullptr || std::is_sorted(ids, ids + n)) {
    lanes([&](std::size_t l, std::size_t j) {
      order[fill[l * kBuckets + (keys[j] >> kLowBits)]++] = static_cast<std::uint32_t>(j);
    });
    return;
  }
  std::copy(starts_.begin(), starts_.end() - 1, fill);  // lane 0 alone, in id order
  std::uint32_t* by_id = grown(scratch_, n);
  std::iota(by_id, by_id + n, std::uint32_t{0});
  std::sort(by_id, by_id + n, [ids](std::uint32_t a, std::uint32_t b) { return ids[a] < ids[b]; });
  for (std::size_t j = 0; j < n; ++j) order[fill[keys[by_id[j]] >> kLowBits]++] = by_id[j];
}

// One stable counting-sort pass of `in` into `out` by the digit (key >> shift) & mask.
void DescendingWalk::radix_pass(const std::uint32_t* in, std::uint32_t* out, std::size_t n,
                                int shift, std::uint32_t mask) {
  const std::uint32_t* keys = keys_.data();
  count_.assign(static_cast<std::size_t>(mask) + 2, 0);
  for (std::size_t i = 0; i < n; ++i) ++count_[((keys[in[i]] >> shift) & mask) + 1];
  for (std::size_t d = 1; d < count_.size(); ++d) count_[d] += count_[d - 1];
  for (std::size_t i = 0; i < n; ++i) out[count_[(keys[in[i]] >> shift) & mask]++] = in[i];
}

void DescendingWalk::open_next_bucket() {
  const std::size_t lo = starts_[bucket_];
  const std::size_t hi = starts_[bucket_ + 1];
  ++bucket_;
  ready_ = hi;
  const std::size_t n = hi - lo;
  std::uint32_t* range = order_.data() + lo;
  if (n <= kSmallBucket) {
    const std::uint32_t* keys = keys_.data();
    std::sort(range, range + n, [this, keys](std::uint32_t a, std::uint32_t b) {
      return keys[a] != keys[b] ? keys[a] < keys[b] : id(a) < id(b);
    });
    return;
  }
  // Stable passes keep equal keys in id order: the low 11 bits, then the next 10.
  std::uint32_t* scratch = grown(scratch_, n);
  radix_pass(range, scratch, n, 0, 0x7FFu);
  radix_pass(scratch, range, n, 11, 0x3FFu);
}

std::size_t DescendingWalk::next() {
  while (pos_ == ready_) open_next_bucket();
  return order_[pos_++];
}

namespace {
// A min-heap of the k largest values seen: one predictable compare per value once full.
// For small k only (O(n log k) when the values come in ascending order).
float kth_largest_by_heap(const float* x, std::size_t n, std::size_t k, std::vector<float>& heap) {
  float* h = grown(heap, k);
  const auto greater = std::greater<float>();
  std::copy(x, x + k, h);
  std::make_heap(h, h + k, greater);
  const auto offer = [&](std::size_t i) {
    if (!(x[i] > h[0])) return;  // equal values leave the k-th largest where it is
    std::pop_heap(h, h + k, greater);
    h[k - 1] = x[i];
    std::push_heap(h, h + k, greater);
  };
  // Blocks of 16 whose largest value (NaNs never win) does not pass the heap's minimum
  // change nothing; the others are offered value by value, in order, as before.
  constexpr std::size_t kBlock = 16;
  std::size_t i = k;
  for (; i + kBlock <= n; i += kBlock) {
    float m = -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < kBlock; ++j) m = x[i + j] > m ? x[i + j] : m;
    if (!(m > h[0])) continue;
    for (std::size_t j = 0; j < kBlock; ++j) offer(i + j);
  }
  for (; i < n; ++i) offer(i);
  return h[0];
}
}  // namespace

float kth_largest(const float* x, std::size_t n, std::size_t k, std::vector<float>& scratch) {
  DETINFER_INTERNAL_CHECK(k >= 1 && k <= n);
  if (k <= kHeapSelect) return kth_largest_by_heap(x, n, k, scratch);
  std::uint32_t count[kBuckets] = {};
  for (std::size_t i = 0; i < n; ++i) ++count[descending_key(x[i]) >> kLowBits];
  // Buckets in ascending key order hold the values in descending order.
  std::size_t before = 0;
  std::uint32_t b = 0;
  while (before + count[b] < k) before += count[b++];
  float* in_bucket = grown(scratch, count[b]);
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if ((descending_key(x[i]) >> kLowBits) == b) in_bucket[m++] = x[i];
  }
  const std::size_t r = k - before - 1;
  std::nth_element(in_bucket, in_bucket + r, in_bucket + m, std::greater<float>());
  return in_bucket[r];
}

}  // namespace detinfer::decode
