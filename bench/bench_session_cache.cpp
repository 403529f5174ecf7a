// Time to first token through DeterministicSession of a 2048-token prompt whose first
// 1920 tokens are in the KV-prefix cache, vs uncached (docs/performance.md, "Caches").
//   bench_session_cache [--benchmark_filter=...]
// Model: Qwen2.5-0.5B layer shape (hidden 896, 14 heads, 2 KV heads, head_dim 64,
// intermediate 4864), bf16 weights, 4 of its 24 layers and a 32000-token vocabulary so a
// run takes about a minute on 2 loaded cores; prefill and the cache's block copies both
// scale with the layer count, so the ratio carries over to the full model.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/cache_test_util.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "ttft_workload.h"

namespace detinfer {
namespace {

struct Fixture {
  testing::TempDir dir;
  std::string model_dir = dir.path() + "/model";
  std::vector<std::int32_t> prompt = bench::ttft_prompt();
  Fixture() { devtools::make_tiny_model(bench::ttft_model_options(model_dir, core::DType::kBF16)); }
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

GenerationConfig one_token() {
  GenerationConfig c;
  c.max_new_tokens = 1;
  c.ignore_eos = true;
  return c;
}

// tier: -1 = no cache, 0 = memory, 1 = disk (memory off), 2 = Redis (memory off).
void BM_SessionTtft2048(benchmark::State& state) {
  Fixture& f = fixture();
  const int tier = static_cast<int>(state.range(0));
  testing::TempDir kv;
  std::unique_ptr<testing::RedisServer> redis;
  SessionOptions o;
  o.threads = 2;
  o.kv_budget_bytes = 1LL << 30;
  o.prefill_chunk_tokens = 512;
  o.recorder.level = RecordLevel::kOff;
  o.cache.prefix.enabled = tier >= 0;
  o.cache.prefix.memory.enabled = tier == 0;
  o.cache.prefix.memory.budget_bytes = 1LL << 30;
  if (tier == 1) o.cache.prefix.disk.directory = kv.path();
  if (tier == 2) {
    const std::string bin = testing::find_redis_server();
    redis = std::make_unique<testing::RedisServer>(bin);
    if (bin.empty() || !redis->start()) {
      state.SkipWithError("redis-server not available");
      return;
    }
    o.cache.prefix.redis.enabled = true;
    o.cache.redis.host = "127.0.0.1";
    o.cache.redis.port = redis->port();
    o.cache.redis.command_timeout_ms = 2000;
  }
  auto session = DeterministicSession::open(f.model_dir, o);
  if (tier >= 0) {  // warm: the 1920-token prefix (+1 so that all 120 blocks are published)
    session.generate(std::vector<std::int32_t>(f.prompt.begin(), f.prompt.begin() + 1921),
                     one_token());
  }
  std::int64_t cached = 0;
  std::uint32_t x = 7;
  for (auto _ : state) {
    const std::vector<std::int32_t> p = bench::with_fresh_tail(f.prompt, x);
    const GenerationResult r = session.generate(p, one_token());
    cached = r.cache.prefix_cached_tokens;
    state.SetIterationTime(r.timings.time_to_first_token_ms / 1000.0);
  }
  state.counters["cached_tokens"] = static_cast<double>(cached);
}
BENCHMARK(BM_SessionTtft2048)
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
