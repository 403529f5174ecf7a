// Mixture of experts behind the KV-prefix cache: tiny Qwen3-MoE, Mixtral and Qwen2-MoE models
// (canonical routing) give bitwise identical outputs and per-step logits digests with the
// cache off, cold and warm, for prompts sharing prefixes of random lengths. A cache hit
// prefills only the prompt's tail, so the tail's rows reach the experts in other batches
// (other row counts per expert) than on a miss; the bits must not move.
#include <gtest/gtest.h>

#include <memory>
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

std::vector<engine::EngineRequest> moe_workload() {
  std::uint64_t x = 77;
  auto next = [&](std::uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  std::vector<std::vector<std::int32_t>> bases(2);
  for (auto& b : bases) {
    for (int i = 0; i < 70; ++i) b.push_back(static_cast<std::int32_t>(3 + next(500)));
  }
  std::vector<engine::EngineRequest> out;
  for (int i = 0; i < 8; ++i) {
    const auto& base = bases[static_cast<std::size_t>(i) % bases.size()];
    const std::size_t shared = 16 + static_cast<std::size_t>(next(base.size() - 15));
    engine::EngineRequest r;
    r.prompt.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(shared));
    const std::uint64_t tail = 1 + next(20);
    for (std::uint64_t t = 0; t < tail; ++t) {
      r.prompt.push_back(static_cast<std::int32_t>(3 + next(500)));
    }
    r.config.max_new_tokens = 5;
    r.config.ignore_eos = true;
    r.config.stop_token_ids = std::vector<std::int32_t>{};
    if (i % 2 == 1) {
      r.config.temperature = 0.8f;
      r.config.top_k = 40;
    }
    r.seed = 500 + static_cast<std::uint64_t>(i);
    r.config.seed = r.seed;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<GenerationResult> run(model::Model& m, const std::vector<engine::EngineRequest>& reqs,
                                  std::shared_ptr<cache::PrefixCache> cache) {
  engine::EngineOptions eo;
  eo.kv_block_size = 16;
  eo.prefill_chunk_tokens = 40;
  engine::Engine engine(m, nullptr, eo);
  if (cache) engine.set_prefix_provider(std::make_shared<testing::CachePrefixProvider>(cache, m));
  std::vector<GenerationResult> out;
  for (const auto& r : reqs) out.push_back(engine.submit(r).get());
  return out;
}

TEST(CacheMoe, HitAndMissGiveIdenticalOutputs) {
  for (const auto arch : {devtools::TinyArch::kQwen3Moe, devtools::TinyArch::kMixtral,
                          devtools::TinyArch::kQwen2Moe}) {
    testing::TempDir dir;
    devtools::TinyModelOptions o;
    o.arch = arch;
    o.out_dir = dir.path() + "/model";
    o.vocab = 512;
    o.seed = 9;
    if (arch == devtools::TinyArch::kQwen3Moe) o.head_dim = 32;
    devtools::make_tiny_model(o);
    const auto m = model::Model::load(o.out_dir, model::ModelOptions{});
    const auto reqs = moe_workload();
    const auto reference = run(*m, reqs, nullptr);
    PrefixCacheOptions co;
    co.memory.budget_bytes = 64 << 20;
    auto cache = std::make_shared<cache::PrefixCache>(co);
    const auto cold = run(*m, reqs, cache);
    const auto warm = run(*m, reqs, cache);
    std::int64_t cached_cold = 0, cached_warm = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      for (const auto* got : {&cold, &warm}) {
        const cache::ResultComparison c = cache::compare_results(reference[i], (*got)[i]);
        EXPECT_TRUE(c.equal) << "arch " << static_cast<int>(arch) << ", request " << i << ": "
                             << c.first_difference;
      }
      cached_cold += cold[i].cache.prefix_cached_tokens;
      cached_warm += warm[i].cache.prefix_cached_tokens;
    }
    EXPECT_GT(cached_cold, 0);
    EXPECT_GT(cached_warm, cached_cold);
  }
}

}  // namespace
}  // namespace detinfer
