// The cache stage of a session's request pipeline: the KV-prefix cache behind the
// engine's PrefixProvider seam, and the result cache (a lookup before the engine, a store
// or audit when the engine finishes a request). Requests whose policy says
// use_caches = false (replays) never touch either. docs/architecture.md, "A session's
// request pipeline"; docs/cache.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cache/prefix_cache.h"
#include "cache/result_cache.h"
#include "detinfer/session.h"
#include "engine/engine.h"
#include "model/model.h"
#include "session/numerics_identity.h"

namespace detinfer::session {

// Whether any sequence of `r` was cancelled (such results are neither cached nor checked).
bool has_cancelled(const GenerationResult& r);

class CacheBridge final : public engine::PrefixProvider, public engine::EngineObserver {
 public:
  // Opens the caches the options enable (Error(kInvalidArgument) naming the option,
  // Error(kUnavailable) when a cache directory cannot be opened). `model` must outlive
  // this bridge.
  // `numerics` keys both caches (session/numerics_identity.h).
  CacheBridge(const SessionOptions& options, const model::Model& model,
              const NumericsIdentity& numerics, const Hash128& tokenizer_hash);

  // Whether the engine should get this bridge as its prefix provider.
  bool has_prefix_cache() const { return prefix_ != nullptr && prefix_->enabled(); }

  // Before the engine (caller's thread): a result-cache hit, already streamed to the
  // request's callback, or nullopt (a miss, an audited hit the engine must recompute,
  // the result cache off, not canonical, or use_caches = false).
  std::optional<GenerationResult> lookup(const engine::EngineRequest& r);
  // Drops what lookup() kept for a request the engine then refused.
  void forget(std::uint64_t id);

  // PrefixProvider (engine thread).
  std::int64_t restore(const engine::EngineRequest& r, model::KvCachePool& pool,
                       std::vector<std::int32_t>& table) override;
  void publish(const engine::EngineRequest& r, const model::KvCachePool& pool,
               const std::vector<std::int32_t>& table) override;
  void publish_sequence(const engine::EngineRequest& r, const std::vector<std::int32_t>& tokens,
                        const model::KvCachePool& pool,
                        const std::vector<std::int32_t>& table) override;
  std::int64_t restore_sequence(const engine::EngineRequest& r,
                                const std::vector<std::int32_t>& tokens, model::KvCachePool& pool,
                                std::vector<std::int32_t>& table) override;

  // EngineObserver (engine thread): stores a finished result, or audits a cached one.
  void on_finished(const engine::EngineRequest& r, GenerationResult& result) override;
  void on_failed(const engine::EngineRequest& r, const Error& e) override;
  void on_abandoned(const engine::EngineRequest& r) override { forget(r.id); }

  CacheStats stats() const;
  void invalidate();

 private:
  Hash128 result_key(const engine::EngineRequest& r) const;

  const model::Model& model_;
  const Hash128 tokenizer_hash_;
  std::unique_ptr<cache::PrefixCache> prefix_;
  const NumericsIdentity numerics_;
  const std::string prefix_salt_;  // prefix_salt(numerics_, cache_salt)
  std::once_flag prefix_opened_;
  std::unique_ptr<cache::ResultCache> results_;
  bool serve_results_ = false;  // result cache on and canonical mode

  std::mutex mu_;
  std::map<std::uint64_t, GenerationResult> audits_;  // id -> cached result to compare
};

}  // namespace detinfer::session
