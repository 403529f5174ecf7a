#include "cache/prefix_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cache/disk_store.h"
#include "cache/memory_store.h"
#include "cache_test_util.h"
#include "core/memory_limits.h"
#include "detinfer/error.h"

namespace detinfer {
namespace {

using testing::make_payload;
using testing::TempDir;

constexpr std::int64_t kBlock = 16;
constexpr std::int64_t kBytes = 2048;

cache::PrefixNamespace ns_for(const char* model) {
  cache::PrefixNamespace ns;
  ns.model_fingerprint = xxh3_128(model);
  ns.block_size = kBlock;
  ns.block_bytes = kBytes;
  return ns;
}

std::vector<std::int32_t> prompt(std::size_t n, std::uint32_t seed) {
  std::vector<std::int32_t> t(n);
  std::uint32_t x = seed;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<std::int32_t>(x >> 16);
  }
  return t;
}

// What "prefill" would have produced for block i of a match: derived from its key, so
// that a wrong block can never compare equal.
cache::BytesPtr block_for(const Hash128& key) { return make_payload(key.low ^ key.high, kBytes); }

// The engine's side: use the cached chain, "prefill" the rest and insert the new blocks.
std::int64_t admit(cache::PrefixCache& cache, const std::vector<std::int32_t>& tokens,
                   std::string_view salt = {}) {
  cache::PrefixMatch m = cache.lookup(tokens, salt);
  for (std::size_t i = 0; i < m.blocks.size(); ++i) {
    EXPECT_EQ(*m.blocks[i], *block_for(m.keys[i])) << "block " << i << " has wrong bytes";
  }
  for (std::size_t i = m.blocks.size(); i < m.keys.size(); ++i) {
    cache.insert(m.keys[i], block_for(m.keys[i]));
  }
  return m.cached_tokens();
}

PrefixCacheOptions memory_only() {
  PrefixCacheOptions o;
  o.memory.budget_bytes = 64 << 20;
  return o;
}

TEST(PrefixCache, LongestChainOfFullBlocksLeavingTheLastToken) {
  cache::PrefixCache cache(memory_only());
  cache.open(ns_for("a"));
  const auto p = prompt(100, 1);  // 6 full blocks
  EXPECT_EQ(admit(cache, p), 0);
  EXPECT_EQ(admit(cache, p), 96);
  // Exactly 96 tokens: the last block stays uncached so the last token gets logits.
  const std::vector<std::int32_t> p96(p.begin(), p.begin() + 96);
  EXPECT_EQ(admit(cache, p96), 80);
  // Shared prefix of 40 tokens, then divergence: 2 full blocks match.
  auto q = p;
  q[40] += 1;
  EXPECT_EQ(admit(cache, q), 32);
  // Explicit max_blocks.
  EXPECT_EQ(cache.lookup(p, {}, 2).cached_tokens(), 32);
  EXPECT_EQ(cache.lookup(p, {}, 100).cached_tokens(), 96);
  EXPECT_EQ(cache.lookup({}).cached_tokens(), 0);
  const PrefixCacheStats s = cache.stats();
  EXPECT_EQ(s.lookups, 7);
  EXPECT_EQ(s.memory.hit_tokens, s.memory.hits * kBlock);
  EXPECT_EQ(s.memory.miss_tokens, s.memory.misses * kBlock);
  EXPECT_EQ(s.cached_tokens, 96 + 80 + 32 + 32 + 96);
}

TEST(PrefixCache, ChainStopsAtTheFirstMissingBlock) {
  auto* memory = new cache::MemoryStore(64 << 20, 0);
  cache::PrefixCache::Tiers tiers;
  tiers.memory.reset(memory);
  cache::PrefixCache cache(std::move(tiers));
  cache.open(ns_for("a"));
  const auto p = prompt(80, 2);
  admit(cache, p);
  memory->erase(cache.lookup(p).keys[2]);
  EXPECT_EQ(cache.lookup(p).cached_tokens(), 32);  // blocks 3 and 4 are not reachable
}

// Same tokens, a model whose fingerprint differs in one bit: never a hit, even in a tier
// that is not purged on a model switch (disk).
TEST(PrefixCache, NearCollisionOfModelsNeverHits) {
  TempDir dir;
  PrefixCacheOptions o;
  o.memory.enabled = false;
  o.disk.directory = dir.path();
  cache::PrefixCache cache(o);
  cache::PrefixNamespace a = ns_for("a");
  cache::PrefixNamespace b = a;
  b.model_fingerprint.high ^= 1ull << 63;
  const auto p = prompt(64, 3);
  cache.open(a);
  admit(cache, p);
  EXPECT_EQ(cache.lookup(p).cached_tokens(), 48);
  cache.open(b);
  EXPECT_EQ(cache.lookup(p).cached_tokens(), 0);
  cache::PrefixNamespace c = a;
  c.mode = NumericsMode::kFast;
  cache.open(c);
  EXPECT_EQ(cache.lookup(p).cached_tokens(), 0);
  cache.open(a);
  EXPECT_EQ(cache.lookup(p, "salt").cached_tokens(), 0);
  EXPECT_EQ(cache.lookup(p).cached_tokens(), 48);
}

TEST(PrefixCache, SwitchingModelPurgesMemory) {
  cache::PrefixCache cache(memory_only());
  cache.open(ns_for("a"));
  admit(cache, prompt(64, 4));
  EXPECT_GT(cache.stats().memory.bytes, 0);
  cache.open(ns_for("b"));
  EXPECT_EQ(cache.stats().memory.bytes, 0);
  cache.open(ns_for("a"));
  EXPECT_EQ(cache.lookup(prompt(64, 4)).cached_tokens(), 0);
}

TEST(PrefixCache, DiskHitsArePromotedAndSurviveRestart) {
  TempDir dir;
  PrefixCacheOptions o = memory_only();
  o.disk.directory = dir.path();
  const auto p = prompt(70, 5);
  {
    cache::PrefixCache cache(o);
    cache.open(ns_for("a"));
    admit(cache, p);
  }
  cache::PrefixCache cache(o);  // a "restart": empty memory, same directory
  cache.open(ns_for("a"));
  EXPECT_EQ(admit(cache, p), 64);
  PrefixCacheStats s = cache.stats();
  EXPECT_EQ(s.disk.hits, 4);
  EXPECT_EQ(s.memory.misses, 4);
  EXPECT_EQ(admit(cache, p), 64);
  s = cache.stats();
  EXPECT_EQ(s.memory.hits, 4);  // promoted
  EXPECT_EQ(s.disk.hits, 4);
  cache.invalidate_all();
  EXPECT_EQ(cache.lookup(p).cached_tokens(), 0);
}

// A tier that is down: every get is a miss and every put is dropped.
class DownStore final : public cache::BlockStore {
 public:
  const char* name() const override { return "down"; }
  cache::BytesPtr get(const Hash128&, std::size_t) override {
    ++stats_.misses;
    ++stats_.backend_errors;
    return nullptr;
  }
  void put(const Hash128&, const cache::BytesPtr&) override { ++stats_.backend_errors; }
  void erase(const Hash128&) override {}
  void invalidate_all() override {}
  void open_model(const Hash128&) override {}
  CacheTierStats stats() const override { return stats_; }

 private:
  CacheTierStats stats_;
};

// A buggy tier that serves bytes of the wrong size: never passed on.
class WrongSizeStore final : public cache::BlockStore {
 public:
  const char* name() const override { return "wrong"; }
  cache::BytesPtr get(const Hash128&, std::size_t) override { return make_payload(1, 10); }
  void put(const Hash128&, const cache::BytesPtr&) override {}
  void erase(const Hash128&) override {}
  void invalidate_all() override {}
  void open_model(const Hash128&) override {}
  CacheTierStats stats() const override { return {}; }
};

TEST(PrefixCache, FailingTiersDegradeToMisses) {
  cache::PrefixCache::Tiers tiers;
  tiers.memory = std::make_unique<cache::MemoryStore>(64 << 20, 0);
  tiers.disk = std::make_unique<DownStore>();
  tiers.redis = std::make_unique<WrongSizeStore>();
  cache::PrefixCache cache(std::move(tiers));
  cache.open(ns_for("a"));
  const auto p = prompt(50, 6);
  EXPECT_EQ(admit(cache, p), 0);
  EXPECT_EQ(admit(cache, p), 48);
  EXPECT_EQ(cache.stats().disk.backend_errors, 1 + 3);
}

TEST(PrefixCache, MisuseIsReported) {
  cache::PrefixCache cache(memory_only());
  // Before open(): nothing is cached, nothing fails.
  EXPECT_EQ(cache.lookup(prompt(40, 1)).keys.size(), 0u);
  cache.insert(Hash128{}, make_payload(1, 3));
  cache.open(ns_for("a"));
  EXPECT_THROW(cache.insert(Hash128{}, make_payload(1, 3)), Error);
  cache::PrefixNamespace bad = ns_for("a");
  bad.block_bytes = 0;
  EXPECT_THROW(cache.open(bad), Error);
  PrefixCacheOptions o;
  o.redis.enabled = true;
  EXPECT_THROW(cache::PrefixCache{o}, Error);  // Redis tier without a host
  PrefixCacheOptions off;
  off.enabled = false;
  cache::PrefixCache disabled(off);
  EXPECT_FALSE(disabled.enabled());
  disabled.open(ns_for("a"));
  EXPECT_EQ(admit(disabled, prompt(40, 1)), 0);
  EXPECT_EQ(admit(disabled, prompt(40, 1)), 0);
}

TEST(PrefixCache, DefaultMemoryBudgetIsAFifthOfPhysicalMemory) {
  PrefixCacheOptions o;
  cache::PrefixCache cache(o);
  EXPECT_TRUE(cache.enabled());
  EXPECT_GT(core::memory_limit_bytes(), 0);
  EXPECT_EQ(cache.stats().memory.budget_bytes, core::memory_limit_bytes() / 5);
}

}  // namespace
}  // namespace detinfer
