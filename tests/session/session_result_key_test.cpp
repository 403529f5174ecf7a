// Issue 14 (result-cache key): a warm result cache serves, for a request that differs from
// a cached one in any single GenerationConfig field, exactly what an uncached session
// computes — tokens, text, finish reasons and every digest. Version 1 of the key omitted
// first_sample_index and served the cached sample instead.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::tiny_model_dir;
using testing::tiny_options;

GenerationConfig sampled_base() {
  GenerationConfig c;
  c.max_new_tokens = 6;
  c.temperature = 0.9f;
  c.top_k = 50;
  c.top_p = 0.95f;
  c.seed = 7;
  return c;
}

GenerationConfig beam_base() {
  GenerationConfig c;
  c.max_new_tokens = 6;
  c.num_beams = 2;
  return c;
}

struct Flip {
  const char* field;
  GenerationConfig (*base)();
  std::function<void(GenerationConfig&)> edit;
};

// One flip per GenerationConfig field (all of them affect the output).
std::vector<Flip> flips() {
  return {
      {"max_new_tokens", sampled_base, [](auto& c) { c.max_new_tokens = 5; }},
      {"temperature", sampled_base, [](auto& c) { c.temperature = 1.3f; }},
      {"top_k", sampled_base, [](auto& c) { c.top_k = 3; }},
      {"top_p", sampled_base, [](auto& c) { c.top_p = 0.5f; }},
      {"min_p", sampled_base, [](auto& c) { c.min_p = 0.2f; }},
      {"repetition_penalty", sampled_base, [](auto& c) { c.repetition_penalty = 1.5f; }},
      {"presence_penalty", sampled_base, [](auto& c) { c.presence_penalty = 1.0f; }},
      {"frequency_penalty", sampled_base, [](auto& c) { c.frequency_penalty = -1.0f; }},
      {"seed", sampled_base, [](auto& c) { c.seed = 8; }},
      {"num_return_sequences", sampled_base, [](auto& c) { c.num_return_sequences = 2; }},
      {"first_sample_index", sampled_base, [](auto& c) { c.first_sample_index = 1; }},
      {"num_beams", beam_base, [](auto& c) { c.num_beams = 3; }},
      {"length_penalty", beam_base, [](auto& c) { c.length_penalty = -2.0f; }},
      {"early_stopping", beam_base, [](auto& c) { c.early_stopping = true; }},
      {"stop_token_ids", sampled_base,
       [](auto& c) {
         c.stop_token_ids = {{1, 2, 3}};
       }},
      {"stop_strings", sampled_base, [](auto& c) { c.stop_strings = {"e"}; }},
      {"logprobs", sampled_base, [](auto& c) { c.logprobs = 2; }},
      {"ignore_eos", sampled_base, [](auto& c) { c.ignore_eos = true; }},
  };
}

void expect_same(const GenerationResult& want, const GenerationResult& got,
                 const std::string& what) {
  EXPECT_EQ(want.seed, got.seed) << what;
  ASSERT_EQ(want.sequences.size(), got.sequences.size()) << what;
  for (std::size_t k = 0; k < want.sequences.size(); ++k) {
    const Sequence& a = want.sequences[k];
    const Sequence& b = got.sequences[k];
    EXPECT_EQ(a.tokens, b.tokens) << what << " sequence " << k;
    EXPECT_EQ(a.text, b.text) << what << " sequence " << k;
    EXPECT_EQ(a.finish_reason, b.finish_reason) << what << " sequence " << k;
    EXPECT_EQ(a.digest, b.digest) << what << " sequence " << k;
    EXPECT_EQ(a.step_digests, b.step_digests) << what << " sequence " << k;
    EXPECT_EQ(a.logprobs.size(), b.logprobs.size()) << what << " sequence " << k;
  }
}

TEST(SessionResultKey, AWarmResultCacheServesWhatAnUncachedRunComputesForEveryField) {
  SessionOptions cached_options = tiny_options();
  cached_options.cache.result.enabled = true;
  auto cached = DeterministicSession::open(tiny_model_dir(), cached_options);
  auto plain = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const std::vector<std::int32_t> prompt = {11, 22, 33, 44, 55};
  for (const Flip& f : flips()) {
    SCOPED_TRACE(f.field);
    const GenerationConfig base = f.base();
    GenerationConfig flipped = base;
    f.edit(flipped);
    cached.generate(prompt, base);  // warms the result cache with the unflipped request
    const GenerationResult served = cached.generate(prompt, flipped);
    const GenerationResult computed = plain.generate(prompt, flipped);
    expect_same(computed, served, f.field);
    // The flipped request is now cached too: served again, identical, as a hit.
    const GenerationResult again = cached.generate(prompt, flipped);
    EXPECT_TRUE(again.cache.result_cache_hit);
    expect_same(computed, again, std::string(f.field) + " (hit)");
  }
}

}  // namespace
}  // namespace detinfer
