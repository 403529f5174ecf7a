#include "decode/logits_processor.h"

#include <algorithm>
#include <numeric>

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

DescendingWalk::DescendingWalk(const std::vector<float>& values,
                               const std::vector<std::int32_t>& ids)
    : values_(values), ids_(ids), heap_(values.size()), size_(values.size()) {
  std::iota(heap_.begin(), heap_.end(), std::size_t{0});
  std::make_heap(heap_.begin(), heap_.end(),
                 [this](std::size_t a, std::size_t b) { return before(a, b); });
}

bool DescendingWalk::before(std::size_t a, std::size_t b) const {
  if (values_[a] != values_[b]) return values_[a] < values_[b];
  return ids_[a] > ids_[b];
}

std::size_t DescendingWalk::next() {
  std::pop_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(size_),
                [this](std::size_t a, std::size_t b) { return before(a, b); });
  return heap_[--size_];
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
