// The reference wiring of the KV-prefix cache into the engine's PrefixProvider seam
// (engine/engine_hooks.h), shared by the end-to-end test and bench_cache_ttft. The
// session composes the same thing.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/prefix_pool.h"
#include "engine/engine.h"
#include "model/model.h"

namespace detinfer::testing {

class CachePrefixProvider final : public engine::PrefixProvider {
 public:
  CachePrefixProvider(std::shared_ptr<cache::PrefixCache> cache, const model::Model& model,
                      std::string salt = {})
      : cache_(std::move(cache)), model_(model), salt_(std::move(salt)) {}

  std::int64_t restore(const engine::EngineRequest& r, model::KvCachePool& pool,
                       std::vector<std::int32_t>& table) override {
    open_once(pool);
    return cache::restore_prefix_blocks(*cache_, r.prompt, salt_, pool, table);
  }
  void publish(const engine::EngineRequest& r, const model::KvCachePool& pool,
               const std::vector<std::int32_t>& table) override {
    open_once(pool);
    cache::publish_prefix_blocks(*cache_, r.prompt, salt_, pool, table);
  }

 private:
  // The pool (hence block_bytes) is created by the engine: open on first use.
  void open_once(const model::KvCachePool& pool) {
    std::call_once(opened_, [&] {
      cache::PrefixNamespace ns;
      ns.model_fingerprint = model_.fingerprint();
      ns.mode = model_.mode();
      ns.block_size = pool.block_size();
      ns.block_bytes = pool.block_bytes();
      cache_->open(ns);
    });
  }

  std::shared_ptr<cache::PrefixCache> cache_;
  const model::Model& model_;
  std::string salt_;
  std::once_flag opened_;
};

}  // namespace detinfer::testing
