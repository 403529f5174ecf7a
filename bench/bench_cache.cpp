// KV-prefix cache costs (docs/performance.md, "Caches (issue 7)").
//   bench_cache [--benchmark_filter=...]
// Block: Qwen2.5-0.5B shape, 24 layers x (K, V) x 16 tokens x 2 KV heads x 64 dims x f32
// = 384 KiB. Redis benchmarks start a private redis-server on a free loopback port and are
// skipped when the binary is missing.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "cache/cache_test_util.h"
#include "cache/disk_store.h"
#include "cache/memory_store.h"
#include "cache/prefix_cache.h"
#include "cache/prefix_keys.h"
#include "cache/redis_store.h"

namespace detinfer {
namespace {

constexpr std::int64_t kBlockTokens = 16;
constexpr std::size_t kBlockBytes = 24 * 2 * kBlockTokens * 2 * 64 * 4;

std::vector<std::int32_t> prompt(std::size_t n) {
  std::vector<std::int32_t> t(n);
  std::uint32_t x = 12345;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<std::int32_t>(x % 151000u);
  }
  return t;
}

// Key chain of a 2048-token prompt; items = tokens.
void BM_KeyChain(benchmark::State& state) {
  cache::PrefixNamespace ns;
  ns.model_fingerprint = xxh3_128("model");
  ns.block_size = state.range(0);
  const auto t = prompt(2048);
  for (auto _ : state) {
    const Hash128 root = cache::prefix_root(ns);
    auto keys = cache::prefix_block_keys(root, t.data(), t.size(), ns.block_size);
    benchmark::DoNotOptimize(keys.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(t.size()));
}
BENCHMARK(BM_KeyChain)->Arg(16)->Arg(32);

// Baseline: copying one block (what KvCachePool::import_block does on a hit).
void BM_BlockMemcpy(benchmark::State& state) {
  std::vector<std::uint8_t> src(kBlockBytes, 1), dst(kBlockBytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBlockBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kBlockBytes));
}
BENCHMARK(BM_BlockMemcpy);

// get of one resident block; put of a block (with eviction at steady state).
void run_get(benchmark::State& state, cache::BlockStore& store) {
  constexpr int kKeys = 64;
  for (int i = 0; i < kKeys; ++i) {
    store.put(testing::test_key(i), testing::make_payload(i, kBlockBytes));
  }
  int i = 0;
  for (auto _ : state) {
    cache::BytesPtr p = store.get(testing::test_key(i++ % kKeys), kBlockBytes);
    if (!p) state.SkipWithError("miss");
    benchmark::DoNotOptimize(p.get());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kBlockBytes));
}
void run_put(benchmark::State& state, cache::BlockStore& store) {
  const cache::BytesPtr payload = testing::make_payload(1, kBlockBytes);
  std::uint64_t i = 0;
  for (auto _ : state) store.put(testing::test_key(1000 + i++ % 256), payload);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kBlockBytes));
}

void BM_MemoryGet(benchmark::State& state) {
  cache::MemoryStore m(1LL << 30, 3600);
  run_get(state, m);
}
BENCHMARK(BM_MemoryGet);
void BM_MemoryPut(benchmark::State& state) {
  cache::MemoryStore m(64 * static_cast<std::int64_t>(kBlockBytes),
                       3600);  // evicts at steady state
  run_put(state, m);
}
BENCHMARK(BM_MemoryPut);

void BM_DiskGet(benchmark::State& state) {
  testing::TempDir dir;
  cache::DiskStore d(dir.path(), 1LL << 30, cache::kKvBlockMagic);
  run_get(state, d);
}
BENCHMARK(BM_DiskGet)->UseRealTime();
void BM_DiskPut(benchmark::State& state) {
  testing::TempDir dir;
  cache::DiskStore d(dir.path(),
                     64 * static_cast<std::int64_t>(kBlockBytes + cache::kEntryHeaderBytes),
                     cache::kKvBlockMagic);
  run_put(state, d);
}
BENCHMARK(BM_DiskPut)->UseRealTime();

std::unique_ptr<testing::RedisServer> start_redis(benchmark::State& state) {
  const std::string bin = testing::find_redis_server();
  if (bin.empty()) {
    state.SkipWithError("redis-server not installed");
    return nullptr;
  }
  auto server = std::make_unique<testing::RedisServer>(bin);
  if (!server->start()) {
    state.SkipWithError("redis-server did not start");
    return nullptr;
  }
  return server;
}
std::unique_ptr<cache::RedisStore> redis_store(int port) {
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.command_timeout_ms = 1000;  // a benchmark measures, it should not time out
  auto s = std::make_unique<cache::RedisStore>(o, "detinfer:kv:", 3600, cache::kKvBlockMagic);
  s->open_model(xxh3_128("model"));
  return s;
}
void BM_RedisGet(benchmark::State& state) {
  auto server = start_redis(state);
  if (!server) return;
  auto s = redis_store(server->port());
  run_get(state, *s);
}
BENCHMARK(BM_RedisGet)->UseRealTime();
void BM_RedisPut(benchmark::State& state) {
  auto server = start_redis(state);
  if (!server) return;
  auto s = redis_store(server->port());
  run_put(state, *s);
}
BENCHMARK(BM_RedisPut)->UseRealTime();

// The cache side of admitting a 2048-token prompt whose first 1920 tokens are cached:
// key chain + lookup of 120 blocks + copying them (import_block), per serving tier.
// 0 = memory, 1 = disk, 2 = Redis.
void BM_Lookup1920(benchmark::State& state) {
  const int tier = static_cast<int>(state.range(0));
  std::unique_ptr<testing::RedisServer> server;
  testing::TempDir dir;
  cache::PrefixCache::Tiers tiers;
  if (tier == 0) tiers.memory = std::make_unique<cache::MemoryStore>(1LL << 30, 3600);
  if (tier == 1)
    tiers.disk = std::make_unique<cache::DiskStore>(dir.path(), 1LL << 30, cache::kKvBlockMagic);
  if (tier == 2) {
    server = start_redis(state);
    if (!server) return;
    tiers.redis = redis_store(server->port());
  }
  cache::PrefixCache cache(std::move(tiers));
  cache::PrefixNamespace ns;
  ns.model_fingerprint = xxh3_128("model");
  ns.block_size = kBlockTokens;
  ns.block_bytes = static_cast<std::int64_t>(kBlockBytes);
  cache.open(ns);
  const auto t = prompt(2048);
  const std::vector<std::int32_t> cached(t.begin(), t.begin() + 1920);
  cache::PrefixMatch warm = cache.lookup(t);
  const cache::BytesPtr payload = testing::make_payload(7, kBlockBytes);
  for (std::size_t i = 0; i < 120; ++i) cache.insert(warm.keys[i], payload);
  std::vector<std::uint8_t> pool(120 * kBlockBytes);
  for (auto _ : state) {
    cache::PrefixMatch m = cache.lookup(t);
    if (m.cached_tokens() != 1920) state.SkipWithError("expected 1920 cached tokens");
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
      std::memcpy(pool.data() + i * kBlockBytes, m.blocks[i]->data(), kBlockBytes);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 1920);
}
BENCHMARK(BM_Lookup1920)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace detinfer

BENCHMARK_MAIN();
