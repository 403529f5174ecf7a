// The caches wired into DeterministicSession: outputs and per-step digests are bitwise
// the same with the prefix cache off, cold, warm in memory, warm from disk after a
// restart (a new session) and warm from Redis through a new connection; keys never hit
// across model bytes, numerics mode, block size or salt; the result cache serves
// identical results (canonical mode only) and its audit recomputes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cache/cache_test_util.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::TestRng;
using testing::tiny_model_dir;
using testing::tiny_options;

struct Request {
  std::vector<std::int32_t> prompt;
  GenerationConfig config;
};

// Prompts sharing prefixes of random lengths (0..80 tokens of one of two stems), random
// tails, mixed greedy and seeded sampling.
std::vector<Request> requests() {
  TestRng rng{17, 3};
  std::vector<std::vector<std::int32_t>> stems(2);
  for (auto& s : stems) {
    s.resize(80);
    for (auto& t : s) t = static_cast<std::int32_t>(rng.next(512));
  }
  std::vector<Request> out;
  for (int i = 0; i < 10; ++i) {
    Request r;
    const auto& stem = stems[rng.next(2)];
    r.prompt.assign(stem.begin(), stem.begin() + rng.next(81));
    const std::uint32_t tail = 1 + rng.next(20);
    for (std::uint32_t k = 0; k < tail; ++k) {
      r.prompt.push_back(static_cast<std::int32_t>(rng.next(512)));
    }
    r.config.max_new_tokens = 1 + static_cast<std::int32_t>(rng.next(8));
    r.config.ignore_eos = true;
    if (rng.next(2) == 1) {
      r.config.temperature = 0.9f;
      r.config.top_k = 50;
      r.config.seed = rng.next(1000);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<GenerationResult> run_all(DeterministicSession& s) {
  std::vector<RequestHandle> handles;
  for (const Request& r : requests()) handles.push_back(s.submit(r.prompt, r.config));
  std::vector<GenerationResult> out;
  for (auto& h : handles) out.push_back(h.get());
  return out;
}

std::int64_t cached_tokens(const std::vector<GenerationResult>& rs) {
  std::int64_t n = 0;
  for (const auto& r : rs) n += r.cache.prefix_cached_tokens;
  return n;
}

void expect_same(const std::vector<GenerationResult>& want,
                 const std::vector<GenerationResult>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].sequences.size(), got[i].sequences.size()) << what << " request " << i;
    for (std::size_t k = 0; k < want[i].sequences.size(); ++k) {
      const Sequence& a = want[i].sequences[k];
      const Sequence& b = got[i].sequences[k];
      EXPECT_EQ(a.tokens, b.tokens) << what << " request " << i;
      EXPECT_EQ(a.step_digests, b.step_digests) << what << " request " << i;
      EXPECT_EQ(a.digest, b.digest) << what << " request " << i;
      EXPECT_EQ(a.text, b.text) << what << " request " << i;
    }
  }
}

SessionOptions no_cache() {
  SessionOptions o = tiny_options();
  o.cache.prefix.enabled = false;
  return o;
}

// Only the disk tier, in `dir`: what a restarted process would find.
SessionOptions disk_only(const std::string& dir) {
  SessionOptions o = tiny_options();
  o.cache.prefix.memory.enabled = false;
  o.cache.prefix.disk.directory = dir;
  return o;
}

std::string fresh_dir(const std::string& name) {
  const std::string d =
      std::string(std::getenv("DETINFER_TEST_TMP") != nullptr ? std::getenv("DETINFER_TEST_TMP")
                                                              : "/tmp") +
      "/session-cache-" + name;
  std::filesystem::remove_all(d);
  return d;
}

class SessionCache : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = DeterministicSession::open(tiny_model_dir(), no_cache());
    reference_ = new std::vector<GenerationResult>(run_all(s));
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  static std::vector<GenerationResult>* reference_;
};
std::vector<GenerationResult>* SessionCache::reference_ = nullptr;

TEST_F(SessionCache, MemoryTierColdAndWarmAreBitwiseTheUncachedRun) {
  EXPECT_EQ(cached_tokens(*reference_), 0);
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());  // default: memory on
  const auto cold = run_all(s);
  expect_same(*reference_, cold, "memory, cold");
  const auto warm = run_all(s);
  expect_same(*reference_, warm, "memory, warm");
  EXPECT_GT(cached_tokens(warm), cached_tokens(cold));
  const CacheStats st = s.cache_stats();
  EXPECT_GT(st.prefix.memory.hits, 0);
  EXPECT_GT(st.prefix.cached_tokens, 0);

  s.invalidate_caches();
  const GenerationResult again = s.generate(requests()[0].prompt, requests()[0].config);
  EXPECT_EQ(again.cache.prefix_cached_tokens, 0);
}

TEST_F(SessionCache, DiskTierWarmAfterRestart) {
  const std::string dir = fresh_dir("disk");
  {
    auto s = DeterministicSession::open(tiny_model_dir(), disk_only(dir));
    expect_same(*reference_, run_all(s), "disk, cold");
    EXPECT_GT(s.cache_stats().prefix.disk.insertions, 0);
  }
  auto restarted = DeterministicSession::open(tiny_model_dir(), disk_only(dir));
  const auto warm = run_all(restarted);
  expect_same(*reference_, warm, "disk, warm after restart");
  EXPECT_GT(cached_tokens(warm), 0);
  EXPECT_GT(restarted.cache_stats().prefix.disk.hits, 0);
}

TEST_F(SessionCache, RedisTierWarmThroughAnotherConnection) {
  if (!DETINFER_TEST_WITH_REDIS) GTEST_SKIP() << testing::kBuiltWithoutRedis;
  const std::string bin = testing::find_redis_server();
  if (bin.empty()) GTEST_SKIP() << "redis-server not installed: Redis tier not tested";
  testing::RedisServer server(bin);
  ASSERT_TRUE(server.start());
  SessionOptions o = tiny_options();
  o.cache.prefix.memory.enabled = false;
  o.cache.prefix.redis.enabled = true;
  o.cache.redis.host = "127.0.0.1";
  o.cache.redis.port = server.port();
  o.cache.redis.command_timeout_ms = 2000;  // a loaded CI machine must not look like an outage
  o.cache.redis.connect_timeout_ms = 2000;
  {
    auto s = DeterministicSession::open(tiny_model_dir(), o);
    expect_same(*reference_, run_all(s), "redis, cold");
    EXPECT_GT(s.cache_stats().prefix.redis.insertions, 0);
  }
  auto other = DeterministicSession::open(tiny_model_dir(), o);
  const auto warm = run_all(other);
  expect_same(*reference_, warm, "redis, warm");
  EXPECT_GT(cached_tokens(warm), 0);
  EXPECT_GT(other.cache_stats().prefix.redis.hits, 0);

  server.kill();  // an outage is a miss, never an error
  expect_same(*reference_, run_all(other), "redis down");
}

TEST_F(SessionCache, ResultCacheSharedThroughRedis) {
  if (!DETINFER_TEST_WITH_REDIS) GTEST_SKIP() << testing::kBuiltWithoutRedis;
  const std::string bin = testing::find_redis_server();
  if (bin.empty()) GTEST_SKIP() << "redis-server not installed: Redis result tier not tested";
  testing::RedisServer server(bin);
  ASSERT_TRUE(server.start());
  SessionOptions o = no_cache();
  o.cache.result.enabled = true;
  o.cache.result.use_redis = true;
  o.cache.redis.host = "127.0.0.1";
  o.cache.redis.port = server.port();
  o.cache.redis.command_timeout_ms = 2000;
  o.cache.redis.connect_timeout_ms = 2000;
  const Request r = requests()[3];
  GenerationResult first;
  {
    auto a = DeterministicSession::open(tiny_model_dir(), o);
    first = a.generate(r.prompt, r.config);
    EXPECT_FALSE(first.cache.result_cache_hit);
  }
  auto b = DeterministicSession::open(tiny_model_dir(), o);  // empty memory tier
  const GenerationResult hit = b.generate(r.prompt, r.config);
  EXPECT_TRUE(hit.cache.result_cache_hit);
  expect_same({first}, {hit}, "result from Redis");
  EXPECT_EQ(b.cache_stats().result.redis.hits, 1);
}

TEST_F(SessionCache, KeysNeverHitAcrossModelModeBlockSizeOrSalt) {
  const std::string dir = fresh_dir("keys");
  std::vector<std::int32_t> prompt(70);
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<std::int32_t>((i * 37 + 11) % 512);
  }
  GenerationConfig c;
  c.max_new_tokens = 2;
  auto cached_with = [&](const std::string& model, SessionOptions o) {
    auto s = DeterministicSession::open(model, o);
    return s.generate(prompt, c).cache.prefix_cached_tokens;
  };
  EXPECT_EQ(cached_with(tiny_model_dir(), disk_only(dir)), 0);   // populates the disk tier
  EXPECT_EQ(cached_with(tiny_model_dir(), disk_only(dir)), 64);  // same inputs: 4 blocks hit

  devtools::TinyModelOptions other;
  other.out_dir = fresh_dir("other-model");
  other.seed = 7;  // same shape and tokens, other weight bytes
  devtools::make_tiny_model(other);
  EXPECT_EQ(cached_with(other.out_dir, disk_only(dir)), 0) << "another model's blocks served";

  SessionOptions salted = disk_only(dir);
  salted.cache_salt = "tenant-b";
  EXPECT_EQ(cached_with(tiny_model_dir(), salted), 0) << "another salt's blocks served";

  SessionOptions blocks8 = disk_only(dir);
  blocks8.kv_block_size = 8;
  EXPECT_EQ(cached_with(tiny_model_dir(), blocks8), 0) << "another block size's blocks served";

  if (DETINFER_TEST_WITH_TORCH) {  // fast mode needs libtorch
    SessionOptions fast = disk_only(dir);
    fast.mode = NumericsMode::kFast;
    EXPECT_EQ(cached_with(tiny_model_dir(), fast), 0) << "canonical blocks served in fast mode";
  }
}

TEST_F(SessionCache, ResultCacheServesTheSameBitsOnlyInCanonicalMode) {
  SessionOptions o = tiny_options();
  o.cache.result.enabled = true;
  auto s = DeterministicSession::open(tiny_model_dir(), o);
  const Request r = requests()[1];
  const GenerationResult miss = s.generate(r.prompt, r.config);
  EXPECT_FALSE(miss.cache.result_cache_hit);
  std::vector<std::int32_t> streamed;
  const GenerationResult hit = s.generate(r.prompt, r.config, [&](const TokenEvent& ev) {
    if (ev.sample_index == 0) streamed.push_back(ev.token);
    return true;
  });
  EXPECT_TRUE(hit.cache.result_cache_hit);
  expect_same({miss}, {hit}, "result cache hit");
  EXPECT_EQ(streamed, hit.sequences[0].tokens);
  EXPECT_EQ(hit.seed, miss.seed);
  EXPECT_FALSE(hit.fingerprint_json.empty());
  EXPECT_EQ(s.cache_stats().result.memory.hits, 1);
  const std::string text = s.metrics_text();
  EXPECT_NE(text.find("detinfer_cache_hits_total{cache=\"result\"} 1"), std::string::npos) << text;

  if (!DETINFER_TEST_WITH_TORCH) return;  // fast mode needs libtorch
  SessionOptions f = o;
  f.mode = NumericsMode::kFast;
  auto fast = DeterministicSession::open(tiny_model_dir(), f);
  fast.generate(r.prompt, r.config);
  EXPECT_FALSE(fast.generate(r.prompt, r.config).cache.result_cache_hit);
  EXPECT_EQ(fast.cache_stats().result.memory.insertions, 0);
}

TEST_F(SessionCache, ResultCacheAuditRecomputesAndCompares) {
  SessionOptions o = tiny_options();
  o.cache.result.enabled = true;
  o.cache.result.audit_fraction = 1.0;
  auto s = DeterministicSession::open(tiny_model_dir(), o);
  const Request r = requests()[2];
  const GenerationResult first = s.generate(r.prompt, r.config);
  const GenerationResult audited = s.generate(r.prompt, r.config);
  EXPECT_FALSE(audited.cache.result_cache_hit);  // recomputed, then compared
  expect_same({first}, {audited}, "audited hit");
  const ResultCacheStats st = s.cache_stats().result;
  EXPECT_EQ(st.audits, 1);
  EXPECT_EQ(st.audit_mismatches, 0);
}

}  // namespace
}  // namespace detinfer
