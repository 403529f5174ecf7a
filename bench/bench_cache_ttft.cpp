// Time to first token of a 2048-token prompt whose first 1920 tokens are in the KV-prefix
// cache, vs the same prompt uncached (docs/performance.md, "Caches (issue 7)").
//   bench_cache_ttft [--benchmark_filter=...]
// Model: Qwen2.5-0.5B layer shape (hidden 896, 14 heads, 2 KV heads, head_dim 64,
// intermediate 4864) with 4 of its 24 layers and a 32000-token vocabulary, so a run takes
// seconds on 2 cores. Prefill and the cache's block copies both scale with the layer
// count, so the cached/uncached ratio is that of the full model up to the (one-token)
// embedding and lm_head.
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/cache_prefix_provider.h"
#include "cache/cache_test_util.h"
#include "cache/prefix_cache.h"
#include "devtools/model_tools.h"
#include "engine/engine.h"
#include "model/model.h"
#include "ttft_workload.h"

namespace detinfer {
namespace {

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<model::Model> model;
  std::vector<std::int32_t> prompt;  // 2048 tokens
  Fixture() {
    const devtools::TinyModelOptions o = bench::ttft_model_options(dir.path() + "/model");
    devtools::make_tiny_model(o);
    model::ModelOptions mo;
    mo.threads = 2;
    model = model::Model::load(o.out_dir, mo);
    prompt = bench::ttft_prompt();
  }
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

engine::EngineRequest request(std::vector<std::int32_t> prompt) {
  engine::EngineRequest r;
  r.prompt = std::move(prompt);
  r.config.max_new_tokens = 1;
  r.config.ignore_eos = true;
  r.config.stop_token_ids = std::vector<std::int32_t>{};
  r.config.seed = 1;
  r.seed = 1;
  return r;
}

// tier: -1 = no cache, 0 = memory, 1 = disk, 2 = Redis.
void BM_Ttft2048(benchmark::State& state) {
  Fixture& f = fixture();
  const int tier = static_cast<int>(state.range(0));
  testing::TempDir kv;
  std::unique_ptr<testing::RedisServer> redis;
  PrefixCacheOptions o;
  RedisOptions ro;
  o.memory.enabled = tier == 0;
  o.memory.budget_bytes = 1LL << 30;
  if (tier == 1) o.disk.directory = kv.path();
  if (tier == 2) {
    const std::string bin = testing::find_redis_server();
    redis = std::make_unique<testing::RedisServer>(bin);
    if (bin.empty() || !redis->start()) {
      state.SkipWithError("redis-server not available");
      return;
    }
    ro.host = "127.0.0.1";
    ro.port = redis->port();
    ro.command_timeout_ms = 2000;
    o.redis.enabled = true;
  }
  engine::EngineOptions eo;
  eo.kv_block_size = 16;
  eo.kv_budget_bytes = 1LL << 30;
  eo.prefill_chunk_tokens = 512;
  engine::Engine engine(*f.model, nullptr, eo);
  std::shared_ptr<cache::PrefixCache> cache;
  if (tier >= 0) {
    cache = std::make_shared<cache::PrefixCache>(o, ro);
    engine.set_prefix_provider(std::make_shared<testing::CachePrefixProvider>(cache, *f.model));
    // Warm: the 1920-token prefix (+1 token so that all 120 blocks are published).
    std::vector<std::int32_t> warm(f.prompt.begin(), f.prompt.begin() + 1921);
    engine.submit(request(warm)).get();
  }
  std::int64_t cached = 0;
  std::uint32_t x = 7;
  for (auto _ : state) {
    // A fresh 128-token tail each time, so exactly the 1920 shared tokens can hit.
    std::vector<std::int32_t> p = bench::with_fresh_tail(f.prompt, x);
    const GenerationResult r = engine.submit(request(p)).get();
    cached = r.cache.prefix_cached_tokens;
    state.SetIterationTime(r.timings.time_to_first_token_ms / 1000.0);
  }
  state.counters["cached_tokens"] = static_cast<double>(cached);
}
BENCHMARK(BM_Ttft2048)
    ->Arg(-1)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace detinfer

BENCHMARK_MAIN();
