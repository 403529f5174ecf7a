// End to end: the engine on a real (tiny, canonical) model with the KV-prefix cache
// attached through its PrefixProvider seam. For random prompts sharing prefixes of random
// lengths, outputs and per-step logits digests must be bitwise identical with the cache
// off, cold, warm (memory), warm from disk after a "restart" (a new cache on the same
// directory) and warm from Redis through a new cache instance (a new connection, as a
// second process would have), and while Redis is killed and restarted mid-run.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/result_codec.h"
#include "cache_prefix_provider.h"
#include "cache_test_util.h"
#include "devtools/model_tools.h"
#include "engine/engine.h"
#include "model/model.h"

namespace detinfer {
namespace {

struct Workload {
  std::vector<engine::EngineRequest> requests;
};

Workload make_workload() {
  std::uint64_t x = 2024;
  auto next = [&](std::uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  std::vector<std::vector<std::int32_t>> bases(3);
  for (auto& b : bases) {
    for (int i = 0; i < 100; ++i) b.push_back(static_cast<std::int32_t>(3 + next(500)));
  }
  Workload w;
  for (int i = 0; i < 12; ++i) {
    const auto& base = bases[static_cast<std::size_t>(i) % bases.size()];
    const std::size_t shared = static_cast<std::size_t>(next(base.size() + 1));
    engine::EngineRequest r;
    r.prompt.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(shared));
    const std::uint64_t tail = 1 + next(30);
    for (std::uint64_t t = 0; t < tail; ++t) {
      r.prompt.push_back(static_cast<std::int32_t>(3 + next(500)));
    }
    r.config.max_new_tokens = 6;
    r.config.ignore_eos = true;
    r.config.stop_token_ids = std::vector<std::int32_t>{};
    if (i % 2 == 1) {
      r.config.temperature = 0.8f;
      r.config.top_k = 40;
    }
    r.seed = 1000 + static_cast<std::uint64_t>(i);
    r.config.seed = r.seed;
    w.requests.push_back(std::move(r));
  }
  return w;
}

class CacheEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    devtools::TinyModelOptions o;
    o.out_dir = dir_->path() + "/model";
    o.vocab = 512;
    o.seed = 7;
    devtools::make_tiny_model(o);
    model_ = model::Model::load(o.out_dir, model::ModelOptions{}).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  // Runs the workload in order (later prompts can reuse earlier prompts' blocks);
  // `before(i)` runs before request i. Returns the results.
  std::vector<GenerationResult> run(std::shared_ptr<cache::PrefixCache> cache,
                                    const std::function<void(std::size_t)>& before = {}) {
    engine::EngineOptions eo;
    eo.kv_block_size = 16;
    eo.prefill_chunk_tokens = 48;
    engine::Engine engine(*model_, nullptr, eo);
    if (cache)
      engine.set_prefix_provider(std::make_shared<testing::CachePrefixProvider>(cache, *model_));
    std::vector<GenerationResult> out;
    for (std::size_t i = 0; i < workload_.requests.size(); ++i) {
      if (before) before(i);
      out.push_back(engine.submit(workload_.requests[i]).get());
    }
    return out;
  }

  static std::int64_t cached_tokens(const std::vector<GenerationResult>& rs) {
    std::int64_t n = 0;
    for (const auto& r : rs) n += r.cache.prefix_cached_tokens;
    return n;
  }

  void expect_identical(const std::vector<GenerationResult>& got, const std::string& what) {
    ASSERT_EQ(got.size(), reference().size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const cache::ResultComparison c = cache::compare_results(reference()[i], got[i]);
      EXPECT_TRUE(c.equal) << what << ", request " << i << ": " << c.first_difference;
    }
  }

  const std::vector<GenerationResult>& reference() {
    if (reference_.empty()) reference_ = run(nullptr);
    return reference_;
  }

  static testing::TempDir* dir_;
  static model::Model* model_;
  Workload workload_ = make_workload();
  std::vector<GenerationResult> reference_;
};
testing::TempDir* CacheEngine::dir_ = nullptr;
model::Model* CacheEngine::model_ = nullptr;

TEST_F(CacheEngine, MemoryColdAndWarmGiveIdenticalOutputs) {
  EXPECT_EQ(cached_tokens(reference()), 0);
  PrefixCacheOptions o;
  o.memory.budget_bytes = 64 << 20;
  auto cache = std::make_shared<cache::PrefixCache>(o);
  const auto cold = run(cache);
  expect_identical(cold, "memory, cold");
  const auto warm = run(cache);
  expect_identical(warm, "memory, warm");
  EXPECT_GT(cached_tokens(cold), 0);
  EXPECT_GT(cached_tokens(warm), cached_tokens(cold));
  EXPECT_GT(cache->stats().memory.hits, 0);
}

TEST_F(CacheEngine, DiskAfterRestartGivesIdenticalOutputs) {
  testing::TempDir kv;
  PrefixCacheOptions o;
  o.memory.enabled = false;
  o.disk.directory = kv.path();
  expect_identical(run(std::make_shared<cache::PrefixCache>(o)), "disk, cold");
  auto restarted = std::make_shared<cache::PrefixCache>(o);
  const auto warm = run(restarted);
  expect_identical(warm, "disk, after restart");
  EXPECT_GT(cached_tokens(warm), 0);
  EXPECT_GT(restarted->stats().disk.hits, 0);
}

TEST_F(CacheEngine, RedisSharedAndKilledMidRunGiveIdenticalOutputs) {
  if (!DETINFER_TEST_WITH_REDIS) GTEST_SKIP() << testing::kBuiltWithoutRedis;
  const std::string bin = testing::find_redis_server();
  if (bin.empty()) GTEST_SKIP() << "redis-server not installed: Redis end-to-end not tested";
  testing::RedisServer server(bin);
  ASSERT_TRUE(server.start());
  RedisOptions ro;
  ro.host = "127.0.0.1";
  ro.port = server.port();
  ro.connect_timeout_ms = 5000;  // a live server must answer however loaded the machine is
  ro.command_timeout_ms = 5000;
  ro.reconnect_backoff_min_ms = 1;
  ro.reconnect_backoff_max_ms = 1;
  PrefixCacheOptions o;
  o.memory.enabled = false;
  o.redis.enabled = true;
  expect_identical(run(std::make_shared<cache::PrefixCache>(o, ro)), "redis, cold");
  auto second = std::make_shared<cache::PrefixCache>(o, ro);  // another connection
  const auto warm = run(second);
  expect_identical(warm, "redis, warm from another instance");
  EXPECT_GT(cached_tokens(warm), 0);
  EXPECT_GT(second->stats().redis.hits, 0);
  // Killed in the middle of the run: every request still succeeds, same bits.
  auto third = std::make_shared<cache::PrefixCache>(o, ro);
  const auto killed = run(third, [&](std::size_t i) {
    if (i == workload_.requests.size() / 2) server.kill();
  });
  expect_identical(killed, "redis killed mid-run");
  EXPECT_GT(third->stats().redis.backend_errors, 0);
  // Restarted (empty): caching resumes.
  ASSERT_TRUE(server.start(ro.port));
  auto fourth = std::make_shared<cache::PrefixCache>(o, ro);
  expect_identical(run(fourth), "redis restarted, cold");
  EXPECT_GT(fourth->stats().redis.insertions, 0);
  const auto resumed = run(fourth);
  expect_identical(resumed, "redis restarted, warm");
  EXPECT_GT(cached_tokens(resumed), 0);
}

}  // namespace
}  // namespace detinfer
