#include "decode/logits_processor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/check.h"
#include "kernels/kernels.h"

namespace detinfer::decode {

namespace {
std::vector<std::int32_t> sorted_copy(const std::vector<std::int32_t>& a,
                                      const std::vector<std::int32_t>& b) {
  std::vector<std::int32_t> all;
  all.reserve(a.size() + b.size());
  all.insert(all.end(), a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  return all;
}

Candidates keep_if(const Candidates& c, const std::vector<char>& keep) {
  Candidates out;
  const auto kept = static_cast<std::size_t>(std::count(keep.begin(), keep.end(), char{1}));
  out.ids.reserve(kept);
  out.logits.reserve(kept);
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (keep[i]) {
      out.ids.push_back(c.ids[i]);
      out.logits.push_back(c.logits[i]);
    }
  }
  return out;
}
}  // namespace

bool has_penalties(const GenerationConfig& config) {
  return config.repetition_penalty != 1.0f || config.presence_penalty != 0.0f ||
         config.frequency_penalty != 0.0f;
}

void apply_penalties(const GenerationConfig& config, const std::vector<std::int32_t>& prompt,
                     const std::vector<std::int32_t>& generated, float* row, std::int64_t vocab) {
  const auto in_range = [vocab](std::int32_t t) { return t >= 0 && t < vocab; };
  const float rp = config.repetition_penalty;
  if (rp != 1.0f) {
    // Hugging Face: each distinct token of prompt + generated once; negative logits are
    // multiplied, the others divided.
    std::vector<std::int32_t> seen = sorted_copy(prompt, generated);
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (const std::int32_t t : seen) {
      if (!in_range(t)) continue;
      row[t] = row[t] < 0.0f ? row[t] * rp : row[t] / rp;
    }
  }
  const float pp = config.presence_penalty;
  const float fp = config.frequency_penalty;
  if (pp != 0.0f || fp != 0.0f) {
    // OpenAI: logit -= count * frequency_penalty + (count > 0) * presence_penalty, with
    // count = occurrences among the generated tokens.
    std::vector<std::int32_t> gen = sorted_copy(generated, {});
    for (std::size_t i = 0; i < gen.size();) {
      std::size_t j = i;
      while (j < gen.size() && gen[j] == gen[i]) ++j;
      const std::int32_t t = gen[i];
      if (in_range(t)) {
        const float count = static_cast<float>(j - i);
        row[t] = row[t] - (count * fp + pp);
      }
      i = j;
    }
  }
}

std::vector<float> candidate_probs(const Candidates& c) {
  std::vector<float> p(c.size());
  kernels::softmax(c.logits.data(), p.data(), static_cast<std::int64_t>(c.size()));
  return p;
}

namespace {
constexpr int kLowBits = 21;                            // sorted within a bucket
constexpr std::size_t kBuckets = std::size_t{1} << 11;  // by the high 11 bits
constexpr std::size_t kSmallBucket = 64;                // comparison-sorted up to this size

// Ascending keys for descending values: the IEEE bits made order-preserving as unsigned,
// then complemented. -0 is folded onto +0 so that the two compare equal, as floats do.
std::uint32_t descending_key(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  if (b == 0x80000000u) b = 0;
  const std::uint32_t ascending = (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
  return ~ascending;
}

// One stable counting-sort pass of `in` into `out` by the digit (key >> shift) & mask.
void radix_pass(const std::uint32_t* keys, const std::uint32_t* in, std::uint32_t* out,
                std::size_t n, int shift, std::uint32_t mask) {
  std::vector<std::uint32_t> count(static_cast<std::size_t>(mask) + 2, 0);
  for (std::size_t i = 0; i < n; ++i) ++count[((keys[in[i]] >> shift) & mask) + 1];
  for (std::size_t d = 1; d < count.size(); ++d) count[d] += count[d - 1];
  for (std::size_t i = 0; i < n; ++i) out[count[(keys[in[i]] >> shift) & mask]++] = in[i];
}
}  // namespace

DescendingWalk::DescendingWalk(const std::vector<float>& values,
                               const std::vector<std::int32_t>& ids)
    : ids_(ids), keys_(values.size()), order_(values.size()), starts_(kBuckets + 1, 0) {
  const std::size_t n = values.size();
  DETINFER_INTERNAL_CHECK(ids.size() == n && n <= std::numeric_limits<std::uint32_t>::max());
  for (std::size_t i = 0; i < n; ++i) {
    keys_[i] = descending_key(values[i]);
    ++starts_[(keys_[i] >> kLowBits) + 1];
  }
  for (std::size_t b = 1; b <= kBuckets; ++b) starts_[b] += starts_[b - 1];
  // Buckets are filled in id order, which the stable passes keep among equal keys.
  // Candidates come in id order; any other list pays for one sort by id here.
  std::vector<std::uint32_t> fill(starts_.begin(), starts_.end() - 1);
  if (std::is_sorted(ids.begin(), ids.end())) {
    for (std::size_t i = 0; i < n; ++i) {
      order_[fill[keys_[i] >> kLowBits]++] = static_cast<std::uint32_t>(i);
    }
    return;
  }
  std::vector<std::uint32_t> by_id(n);
  std::iota(by_id.begin(), by_id.end(), std::uint32_t{0});
  std::sort(by_id.begin(), by_id.end(),
            [&ids](std::uint32_t a, std::uint32_t b) { return ids[a] < ids[b]; });
  for (const std::uint32_t i : by_id) order_[fill[keys_[i] >> kLowBits]++] = i;
}

void DescendingWalk::open_next_bucket() {
  const std::size_t lo = starts_[bucket_];
  const std::size_t hi = starts_[bucket_ + 1];
  ++bucket_;
  ready_ = hi;
  const std::size_t n = hi - lo;
  std::uint32_t* range = order_.data() + lo;
  if (n <= kSmallBucket) {
    std::sort(range, range + n, [this](std::uint32_t a, std::uint32_t b) {
      return keys_[a] != keys_[b] ? keys_[a] < keys_[b] : ids_[a] < ids_[b];
    });
    return;
  }
  // Stable passes keep equal keys in id order: the low 11 bits, then the next 10.
  std::vector<std::uint32_t> scratch(n);
  radix_pass(keys_.data(), range, scratch.data(), n, 0, 0x7FFu);
  radix_pass(keys_.data(), scratch.data(), range, n, 11, 0x3FFu);
}

std::size_t DescendingWalk::next() {
  while (pos_ == ready_) open_next_bucket();
  return order_[pos_++];
}

Candidates apply_warpers(const GenerationConfig& config, const float* row, std::int64_t vocab) {
  Candidates c;
  c.ids.resize(static_cast<std::size_t>(vocab));
  c.logits.resize(static_cast<std::size_t>(vocab));
  const float t = config.temperature;
  for (std::int64_t i = 0; i < vocab; ++i) {
    c.ids[i] = static_cast<std::int32_t>(i);
    c.logits[i] = t == 1.0f ? row[i] : row[i] / t;
  }
  // top_k: keep logits >= the k-th largest (ties at the threshold are kept, as in HF).
  if (config.top_k > 0 && config.top_k < vocab) {
    std::vector<float> sorted = c.logits;
    std::nth_element(sorted.begin(), sorted.begin() + (config.top_k - 1), sorted.end(),
                     std::greater<float>());
    const float threshold = sorted[config.top_k - 1];
    std::vector<char> keep(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) keep[i] = c.logits[i] >= threshold;
    c = keep_if(c, keep);
  }
  // top_p: the smallest prefix of the stable descending order whose sequential fp32
  // cumulative probability reaches top_p.
  if (config.top_p < 1.0f && c.size() > 1) {
    const std::vector<float> p = candidate_probs(c);
    std::vector<char> keep(c.size(), 0);
    float cum = 0.0f;
    for (DescendingWalk walk(p, c.ids); !walk.done();) {
      const std::size_t i = walk.next();
      keep[i] = 1;
      cum = cum + p[i];
      if (cum >= config.top_p) break;
    }
    c = keep_if(c, keep);
  }
  // min_p: keep p >= min_p * max(p).
  if (config.min_p > 0.0f && c.size() > 1) {
    const std::vector<float> p = candidate_probs(c);
    const float threshold = config.min_p * *std::max_element(p.begin(), p.end());
    std::vector<char> keep(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) keep[i] = p[i] >= threshold;
    c = keep_if(c, keep);
  }
  return c;
}

}  // namespace detinfer::decode
