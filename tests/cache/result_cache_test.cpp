#include "cache/result_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "cache/memory_store.h"
#include "cache_test_util.h"
#include "detinfer/error.h"

namespace detinfer {
namespace {

GenerationConfig config() {
  GenerationConfig c;
  c.seed = 42;
  c.temperature = 0.7f;
  c.top_p = 0.9f;
  c.stop_token_ids = std::vector<std::int32_t>{151643, 151645};
  c.stop_strings = {"\n\n", "END"};
  c.logprobs = 2;
  return c;
}

GenerationResult result() {
  GenerationResult r;
  r.prompt_tokens = {1, 2, 3, 4};
  r.seed = 42;
  r.timings.total_ms = 12.5;
  r.fingerprint_json = "{}";
  for (int s = 0; s < 2; ++s) {
    Sequence q;
    q.tokens = {10 + s, 11, 12};
    q.text = s == 0 ? "hello world" : std::string("bin\0ary", 7);
    q.finish_reason = s == 0 ? FinishReason::kStop : FinishReason::kLength;
    for (int t = 0; t < 3; ++t) {
      StepLogprobs st;
      st.token = q.tokens[t];
      st.logprob = -0.1f * static_cast<float>(t + 1) - static_cast<float>(s);
      st.top = {{q.tokens[t], st.logprob}, {7, -std::numeric_limits<float>::infinity()}};
      q.logprobs.push_back(st);
    }
    q.score = -1.2345678901234567 - s;
    q.digest = 0x0123456789abcdefull + static_cast<std::uint64_t>(s);
    q.step_digests = {1, 2, 3 + static_cast<std::uint64_t>(s)};
    r.sequences.push_back(q);
  }
  return r;
}

Hash128 key_of(const Hash128& model, NumericsMode mode, std::uint32_t spec, const Hash128& tok,
               const std::vector<std::int32_t>& prompt, const GenerationConfig& c) {
  return cache::result_cache_key(model, mode, spec, tok, prompt,
                                 cache::canonical_generation_config(c));
}

TEST(ResultCacheKey, EveryInputChangesTheKey) {
  const Hash128 m = xxh3_128("model"), tk = xxh3_128("tokenizer");
  const std::vector<std::int32_t> p = {1, 2, 3};
  const GenerationConfig c = config();
  std::vector<Hash128> keys;
  keys.push_back(key_of(m, NumericsMode::kCanonical, 1, tk, p, c));
  keys.push_back(key_of(Hash128{m.high, m.low ^ 1}, NumericsMode::kCanonical, 1, tk, p, c));
  keys.push_back(key_of(m, NumericsMode::kFast, 1, tk, p, c));
  keys.push_back(key_of(m, NumericsMode::kCanonical, 2, tk, p, c));
  keys.push_back(key_of(m, NumericsMode::kCanonical, 1, xxh3_128("t2"), p, c));
  keys.push_back(key_of(m, NumericsMode::kCanonical, 1, tk, {1, 2, 4}, c));
  keys.push_back(key_of(m, NumericsMode::kCanonical, 1, tk, {1, 2}, c));
  for (int field = 0; field < 17; ++field) {
    GenerationConfig d = c;
    switch (field) {
      case 0:
        d.max_new_tokens += 1;
        break;
      case 1:
        d.temperature = 0.71f;
        break;
      case 2:
        d.top_k = 5;
        break;
      case 3:
        d.top_p = 0.95f;
        break;
      case 4:
        d.min_p = 0.05f;
        break;
      case 5:
        d.repetition_penalty = 1.1f;
        break;
      case 6:
        d.presence_penalty = 0.5f;
        break;
      case 7:
        d.frequency_penalty = 0.5f;
        break;
      case 8:
        d.seed = 43;
        break;
      case 9:
        d.num_return_sequences = 2;
        break;
      case 10:
        d.num_beams = 2;
        break;
      case 11:
        d.length_penalty = 0.5f;
        break;
      case 12:
        d.early_stopping = true;
        break;
      case 13:
        d.stop_token_ids.reset();
        break;
      case 14:
        d.stop_strings.push_back("x");
        break;
      case 15:
        d.logprobs = 3;
        break;
      case 16:
        d.ignore_eos = true;
        break;
    }
    keys.push_back(key_of(m, NumericsMode::kCanonical, 1, tk, p, d));
  }
  EXPECT_EQ(std::set<Hash128>(keys.begin(), keys.end()).size(), keys.size());
}

TEST(ResultCacheKey, CanonicalConfigNormalizesSetsAndRequiresASeed) {
  GenerationConfig a = config();
  GenerationConfig b = config();
  b.stop_token_ids = std::vector<std::int32_t>{151645, 151643, 151645};
  b.stop_strings = {"END", "\n\n", "END"};
  b.presence_penalty = -0.0f;
  EXPECT_EQ(cache::canonical_generation_config(a), cache::canonical_generation_config(b));
  GenerationConfig no_seed = config();
  no_seed.seed.reset();
  EXPECT_THROW(cache::canonical_generation_config(no_seed), Error);
}

bool same_bits(const GenerationResult& a, const GenerationResult& b) {
  return cache::serialize_result(a) == cache::serialize_result(b) &&
         cache::compare_results(a, b).equal;
}

TEST(ResultCodec, RoundTripIsBitwise) {
  GenerationResult r = result();
  r.sequences[0].logprobs[0].logprob = std::nanf("0x123");
  const cache::Bytes b = cache::serialize_result(r);
  const GenerationResult back = cache::deserialize_result(b);
  EXPECT_EQ(cache::serialize_result(back), b);
  EXPECT_EQ(back.sequences[1].text, std::string("bin\0ary", 7));
  std::uint32_t bits_in, bits_out;
  std::memcpy(&bits_in, &r.sequences[0].logprobs[0].logprob, 4);
  std::memcpy(&bits_out, &back.sequences[0].logprobs[0].logprob, 4);
  EXPECT_EQ(bits_in, bits_out);
  EXPECT_EQ(back.timings.total_ms, 0);  // per-run data is not cached
  EXPECT_TRUE(back.fingerprint_json.empty());
}

TEST(ResultCodec, EveryTruncationIsRejected) {
  const cache::Bytes b = cache::serialize_result(result());
  for (std::size_t n = 0; n < b.size(); ++n) {
    const cache::Bytes cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(cache::deserialize_result(cut), Error) << "length " << n;
  }
  cache::Bytes longer = b;
  longer.push_back(0);
  EXPECT_THROW(cache::deserialize_result(longer), Error);
}

TEST(ResultCodec, CompareFindsTheFirstDifference) {
  const GenerationResult a = result();
  EXPECT_TRUE(cache::compare_results(a, a).equal);
  GenerationResult b = a;
  b.sequences[1].tokens[2] = 99;
  EXPECT_EQ(cache::compare_results(a, b).first_difference,
            "sequence 1: tokens differ from position 2");
  b = a;
  b.sequences[0].logprobs[1].top[0].logprob =
      std::nextafter(b.sequences[0].logprobs[1].top[0].logprob, 0.0f);
  EXPECT_EQ(cache::compare_results(a, b).first_difference, "sequence 0: logprobs of step 1 differ");
  b = a;
  b.sequences[0].step_digests[1] ^= 1;
  EXPECT_EQ(cache::compare_results(a, b).first_difference,
            "sequence 0: logits digest differs from step 1");
  b = a;
  b.timings.total_ms = 99;  // not part of the comparison
  EXPECT_TRUE(cache::compare_results(a, b).equal);
}

TEST(ResultCache, MemoryHitServesTheSameBitsAndExpires) {
  auto clock = std::make_shared<testing::FakeClock>();
  ResultCacheOptions o;
  o.enabled = true;
  o.ttl_seconds = 60;
  cache::ResultCache cache(o, {}, clock);
  cache.open_model(xxh3_128("model"));
  const Hash128 k = testing::test_key(1);
  EXPECT_FALSE(cache.get(k));
  cache.put(k, result());
  const auto hit = cache.get(k);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(hit->cache.result_cache_hit);
  EXPECT_TRUE(same_bits(*hit, result()));
  clock->advance_s(60);
  EXPECT_FALSE(cache.get(k));
  const ResultCacheStats s = cache.stats();
  EXPECT_EQ(s.memory.hits, 1);
  EXPECT_EQ(s.memory.misses, 2);
  EXPECT_EQ(s.memory.expirations, 1);
  cache.put(k, result());
  cache.open_model(xxh3_128("other model"));
  EXPECT_FALSE(cache.get(k));
  // A cancelled result depends on timing, not only on the key: never stored.
  GenerationResult cancelled = result();
  cancelled.sequences[1].finish_reason = FinishReason::kCancelled;
  cache.put(k, cancelled);
  EXPECT_FALSE(cache.get(k));
}

TEST(ResultCache, AuditIsDeterministicAndSamplesTheFraction) {
  cache::ResultCache none(std::make_unique<cache::MemoryStore>(1 << 20, 0), nullptr, 0.0);
  cache::ResultCache all(std::make_unique<cache::MemoryStore>(1 << 20, 0), nullptr, 1.0);
  cache::ResultCache some(std::make_unique<cache::MemoryStore>(1 << 20, 0), nullptr, 0.25);
  cache::ResultCache again(std::make_unique<cache::MemoryStore>(1 << 20, 0), nullptr, 0.25);
  int audited = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const Hash128 k = testing::test_key(static_cast<std::uint64_t>(i));
    EXPECT_FALSE(none.should_audit(k));
    EXPECT_TRUE(all.should_audit(k));
    EXPECT_EQ(some.should_audit(k), again.should_audit(k));
    audited += some.should_audit(k) ? 1 : 0;
  }
  // Binomial(20000, 0.25): sd ~61; 6 sd of tolerance.
  EXPECT_NEAR(audited, n / 4, 370);
  EXPECT_THROW(cache::ResultCache(nullptr, nullptr, 1.5), Error);
}

TEST(ResultCache, AuditMismatchIsCountedAndTheRecomputedResultReplacesTheEntry) {
  cache::ResultCache cache(std::make_unique<cache::MemoryStore>(1 << 20, 0), nullptr, 1.0);
  const Hash128 k = testing::test_key(5);
  cache.put(k, result());
  const auto cached = cache.get(k);
  ASSERT_TRUE(cached);
  EXPECT_TRUE(cache.audit(k, *cached, result()).equal);
  GenerationResult recomputed = result();
  recomputed.sequences[0].digest ^= 1;
  EXPECT_FALSE(cache.audit(k, *cached, recomputed).equal);
  EXPECT_EQ(cache.stats().audits, 2);
  EXPECT_EQ(cache.stats().audit_mismatches, 1);
  const auto now = cache.get(k);
  ASSERT_TRUE(now);
  EXPECT_TRUE(same_bits(*now, recomputed));
}

TEST(ResultCache, DisabledAndInvalidOptions) {
  ResultCacheOptions o;  // disabled by default
  cache::ResultCache cache(o);
  EXPECT_FALSE(cache.enabled());
  cache.put(testing::test_key(1), result());
  EXPECT_FALSE(cache.get(testing::test_key(1)));
  ResultCacheOptions r;
  r.enabled = true;
  r.use_redis = true;
  EXPECT_THROW(cache::ResultCache{r}, Error);
  r.use_redis = false;
  r.audit_fraction = -0.1;
  EXPECT_THROW(cache::ResultCache{r}, Error);
}

}  // namespace
}  // namespace detinfer
