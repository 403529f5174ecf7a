// Concurrent requests sharing prefix blocks and results. Run under ThreadSanitizer by the
// tsan preset (label "tsan"); in every build it checks that no thread is ever served
// bytes other than those inserted under the key.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/result_cache.h"
#include "cache_test_util.h"

namespace detinfer {
namespace {

constexpr std::int64_t kBlock = 8;
constexpr std::int64_t kBytes = 512;

cache::BytesPtr block_for(const Hash128& key) { return testing::make_payload(key.low, kBytes); }

TEST(CacheThreads, SharedPrefixBlocksUnderConcurrency) {
  testing::TempDir dir;
  PrefixCacheOptions o;
  // Room for ~40 blocks: constant eviction while other threads hold blocks.
  o.memory.budget_bytes = 40 * kBytes;
  o.disk.directory = dir.path();
  o.disk.budget_bytes = 100 * (kBytes + 48);
  cache::PrefixCache cache(o);
  cache::PrefixNamespace ns;
  ns.model_fingerprint = xxh3_128("model");
  ns.block_size = kBlock;
  ns.block_bytes = kBytes;
  cache.open(ns);

  std::atomic<int> wrong{0};
  std::atomic<std::int64_t> cached{0};
  std::atomic<bool> stop{false};
  auto worker = [&](std::uint32_t seed) {
    std::uint32_t x = seed;
    for (int it = 0; it < 150; ++it) {
      x = x * 1664525u + 1013904223u;
      // 4 shared system prompts, then a request-specific tail of random length.
      const std::int32_t system = static_cast<std::int32_t>((x >> 8) % 4);
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(5 * kBlock), system);
      for (std::int32_t i = 0; i < static_cast<std::int32_t>(tokens.size()); ++i) tokens[i] += i;
      const std::size_t tail = (x >> 16) % 30;
      for (std::size_t i = 0; i < tail; ++i) {
        tokens.push_back(static_cast<std::int32_t>(seed * 1000 + static_cast<std::uint32_t>(i)));
      }
      cache::PrefixMatch m = cache.lookup(tokens, (x & 1) != 0 ? "" : "salt");
      for (std::size_t i = 0; i < m.blocks.size(); ++i) {
        if (*m.blocks[i] != *block_for(m.keys[i])) ++wrong;
      }
      cached += m.cached_tokens();
      for (std::size_t i = m.blocks.size(); i < m.keys.size(); ++i) {
        cache.insert(m.keys[i], block_for(m.keys[i]));
      }
    }
  };
  std::thread observer([&] {
    while (!stop.load()) {
      const PrefixCacheStats s = cache.stats();
      if (s.memory.bytes > o.memory.budget_bytes) ++wrong;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < 4; ++t) threads.emplace_back(worker, t + 1);
  for (auto& t : threads) t.join();
  stop = true;
  observer.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(cached.load(), 0);
  const PrefixCacheStats s = cache.stats();
  EXPECT_LE(s.memory.bytes, o.memory.budget_bytes);
  EXPECT_LE(s.disk.bytes, o.disk.budget_bytes);
  EXPECT_EQ(s.lookups, 600);
}

// Memory (tiny, so most hits come from Redis) over a real Redis shared by all threads;
// the server is killed half-way: requests keep succeeding and never see wrong bytes.
TEST(CacheThreads, SharedRedisTierUnderConcurrency) {
  if (!DETINFER_TEST_WITH_REDIS) GTEST_SKIP() << testing::kBuiltWithoutRedis;
  const std::string bin = testing::find_redis_server();
  if (bin.empty()) GTEST_SKIP() << "redis-server not installed: Redis concurrency not tested";
  testing::RedisServer server(bin);
  ASSERT_TRUE(server.start());
  RedisOptions ro;
  ro.host = "127.0.0.1";
  ro.port = server.port();
  ro.command_timeout_ms = 2000;  // sanitizer builds are slow
  PrefixCacheOptions o;
  o.memory.budget_bytes = 4 * kBytes;
  o.redis.enabled = true;
  cache::PrefixCache cache(o, ro);
  cache::PrefixNamespace ns;
  ns.block_size = kBlock;
  ns.block_bytes = kBytes;
  cache.open(ns);
  std::atomic<int> wrong{0};
  std::atomic<int> done{0};
  auto worker = [&] {
    for (int it = 0; it < 60; ++it) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(3 * kBlock + 1));
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((it % 5) * 100 + static_cast<int>(i));
      }
      cache::PrefixMatch m = cache.lookup(tokens);
      for (std::size_t i = 0; i < m.blocks.size(); ++i) {
        if (*m.blocks[i] != *block_for(m.keys[i])) ++wrong;
      }
      for (std::size_t i = m.blocks.size(); i < m.keys.size(); ++i) {
        cache.insert(m.keys[i], block_for(m.keys[i]));
      }
      if (++done == 120) server.kill();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const PrefixCacheStats s = cache.stats();
  EXPECT_GT(s.redis.hits, 0);
  EXPECT_GT(s.redis.backend_errors, 0);
}

TEST(CacheThreads, ResultCacheUnderConcurrency) {
  ResultCacheOptions o;
  o.enabled = true;
  o.memory_budget_bytes = 4096;
  o.audit_fraction = 0.5;
  cache::ResultCache cache(o);
  std::atomic<int> wrong{0};
  auto worker = [&](int seed) {
    for (int it = 0; it < 300; ++it) {
      const auto id = static_cast<std::uint64_t>((it * 7 + seed) % 40);
      GenerationResult r;
      r.seed = id;
      r.sequences.resize(1);
      r.sequences[0].tokens.assign(static_cast<std::size_t>(id % 13) + 1,
                                   static_cast<std::int32_t>(id));
      const Hash128 k = testing::test_key(id);
      if (auto hit = cache.get(k)) {
        if (!cache::compare_results(*hit, r).equal) ++wrong;
        if (cache.should_audit(k) && !cache.audit(k, *hit, r).equal) ++wrong;
      } else {
        cache.put(k, r);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cache.stats().audit_mismatches, 0);
  EXPECT_LE(cache.stats().memory.bytes, 4096);
}

}  // namespace
}  // namespace detinfer
