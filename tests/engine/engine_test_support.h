// Helpers shared by the engine tests: requests over the fake model (fake_model.h), small
// engine options, a gate that blocks the engine thread in a token callback, and output
// comparison.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "common/gate.h"
#include "detinfer/philox.h"
#include "engine/engine.h"
#include "engine/fake_model.h"

namespace detinfer::testing {

// Deterministic test randomness: Philox keyed by (seed, stream, i).
struct Rng {
  std::uint64_t seed;
  std::uint64_t stream;
  std::uint64_t i = 0;
  std::uint32_t next(std::uint32_t n) { return philox_bits(seed, stream, i++, 0) % n; }
};

inline std::vector<std::int32_t> random_prompt(Rng& rng, std::uint32_t max_len) {
  std::vector<std::int32_t> p(1 + rng.next(max_len));
  for (auto& t : p) t = 2 + static_cast<std::int32_t>(rng.next(kFakeVocab - 4));  // no eos/poison
  return p;
}

inline GenerationConfig random_config(Rng& rng) {
  GenerationConfig c;
  c.max_new_tokens = 1 + static_cast<std::int32_t>(rng.next(20));
  switch (rng.next(4)) {
    case 0:
      break;  // greedy
    case 1:
      c.temperature = 0.9f;
      c.top_k = 20;
      c.seed = rng.next(1000);
      break;
    case 2:
      c.temperature = 1.2f;
      c.top_p = 0.8f;
      c.num_return_sequences = 2;
      c.seed = rng.next(1000);
      break;
    default:
      c.num_beams = 2;
      break;
  }
  return c;
}

inline engine::EngineRequest request(std::vector<std::int32_t> prompt, const GenerationConfig& c) {
  engine::EngineRequest r;
  r.prompt = std::move(prompt);
  r.config = c;
  r.seed = c.seed.value_or(0);
  return r;
}

inline engine::EngineOptions small_options() {
  engine::EngineOptions o;
  o.max_batch = 8;
  o.prefill_chunk_tokens = 7;
  o.kv_block_size = 4;
  o.kv_budget_bytes = 4096 * 4 * 32;  // 4096 blocks of 4 tokens (32 bytes per token)
  return o;
}

// Submits a one-token request whose token callback holds the engine thread in `gate`, and
// returns once it is held: requests submitted until gate.release() are all queued before
// the next admission, so the schedule is the same in every run.
inline std::future<GenerationResult> hold_engine(engine::Engine& e, Gate& gate) {
  GenerationConfig one;
  one.max_new_tokens = 1;
  engine::EngineRequest blocker = request({5}, one);
  blocker.on_token = gate.callback();
  auto f = e.submit(std::move(blocker));
  gate.wait_entered();
  return f;
}

inline GenerationResult run_alone(const engine::EngineRequest& r,
                                  const engine::EngineOptions& o = small_options()) {
  FakeModel m;
  engine::Engine e(m, nullptr, o);
  return e.submit(r).get();
}

inline void expect_same_output(const GenerationResult& a, const GenerationResult& b,
                               const std::string& what) {
  ASSERT_EQ(a.sequences.size(), b.sequences.size()) << what;
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens) << what << " sample " << i;
    EXPECT_EQ(a.sequences[i].step_digests, b.sequences[i].step_digests) << what << " sample " << i;
    EXPECT_EQ(a.sequences[i].digest, b.sequences[i].digest) << what << " sample " << i;
    EXPECT_EQ(a.sequences[i].finish_reason, b.sequences[i].finish_reason) << what;
  }
}

}  // namespace detinfer::testing
