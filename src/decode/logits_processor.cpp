#include "decode/logits_processor.h"

#include <algorithm>

#include "core/check.h"
#include "decode/sampling_workspace.h"
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

Candidates apply_warpers(const GenerationConfig& config, const float* row, std::int64_t vocab) {
  SamplingWorkspace ws;
  ws.load(row, static_cast<std::size_t>(vocab));
  ws.warp(config, nullptr);
  return ws.candidates();
}

}  // namespace detinfer::decode
