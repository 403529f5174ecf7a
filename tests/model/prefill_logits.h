// The model tests' prefill helper: every position's logits of one sequence, in chunks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "detinfer/numerics.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace detinfer::testing {

// Every position's logits of one prefill of `tokens` in chunks of `chunk` tokens on
// `threads` threads ([T][vocab] floats).
inline std::vector<float> prefill_logits(const std::string& dir,
                                         const std::vector<std::int32_t>& tokens, std::size_t chunk,
                                         std::int32_t threads = 1,
                                         NumericsMode mode = NumericsMode::kCanonical) {
  auto m = model::Model::load(dir, {mode, threads, {}});
  model::KvCachePool kv(m->config(), 16, std::int64_t{16} << 20);
  std::vector<std::int32_t> table;
  for (std::size_t b = 0; b < (tokens.size() + 15) / 16; ++b) table.push_back(kv.allocate());
  std::vector<float> out, step;
  for (std::size_t at = 0; at < tokens.size(); at += chunk) {
    model::SequenceStep s;
    s.tokens.assign(tokens.begin() + at, tokens.begin() + std::min(tokens.size(), at + chunk));
    s.start_pos = static_cast<std::int64_t>(at);
    s.block_table = table;
    s.all_logits = true;
    step.clear();  // forward appends
    m->forward({s}, kv, step);
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

// Every position's logits of `tokens` fed in chunks of `chunk` with KV blocks of 4 tokens;
// with `holes`, the blocks no row can see any more are released before each step and
// their table entries set to -1 (what the engine does, engine_window.cpp).
inline std::vector<float> logits_with_holes(model::Model& m,
                                            const std::vector<std::int32_t>& tokens,
                                            std::size_t chunk, bool holes, std::int64_t* released) {
  model::KvCachePool kv(m.config(), 4, std::int64_t{4} << 20, m.kv_backend(), m.kv_dtype());
  std::vector<std::int32_t> table;
  for (std::size_t b = 0; b < (tokens.size() + 3) / 4; ++b) table.push_back(kv.allocate());
  std::vector<float> out, step;
  for (std::size_t at = 0; at < tokens.size(); at += chunk) {
    const auto pos = static_cast<std::int64_t>(at);
    const std::int64_t live = holes ? model::first_live_block(m.kv_horizon(), pos, 4) : 0;
    for (std::int64_t b = 0; b < live; ++b) {
      if (table[static_cast<std::size_t>(b)] < 0) continue;
      kv.release(table[static_cast<std::size_t>(b)]);
      table[static_cast<std::size_t>(b)] = -1;
      ++*released;
    }
    model::SequenceStep s;
    s.tokens.assign(tokens.begin() + at, tokens.begin() + std::min(tokens.size(), at + chunk));
    s.start_pos = pos;
    s.block_table = table;
    s.all_logits = true;
    step.clear();
    m.forward({s}, kv, step);
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

// The worst relative L2 distance of `got`'s rows ([T][vocab], as prefill_logits returns)
// from a float64 reference model's logits of `tokens`.
template <class Reference>
double worst_rel_l2(const std::vector<float>& got, const Reference& ref,
                    const std::vector<std::int32_t>& tokens) {
  const auto want = ref.logits(tokens);
  double w = 0;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    w = std::max(w, rel_l2(got.data() + t * static_cast<std::size_t>(ref.vocab()), want[t]));
  }
  return w;
}

}  // namespace detinfer::testing
