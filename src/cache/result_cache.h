// The result cache: whole GenerationResults of fully deterministic requests, keyed by
// everything that determines them, in memory and optionally Redis.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "cache/block_store.h"
#include "cache/cache_clock.h"
#include "cache/result_codec.h"
#include "detinfer/cache_options.h"
#include "detinfer/generation.h"
#include "detinfer/numerics.h"

namespace detinfer::cache {

// XXH3-128(model fingerprint | u32 numerics mode | u32 spec version | tokenizer hash |
// prompt ids (u64 count, little-endian u32 each) | length-prefixed canonical config).
// canonical_config: canonical_generation_config() of the normalized config.
Hash128 result_cache_key(const Hash128& model_fingerprint, NumericsMode mode,
                         std::uint32_t spec_version, const Hash128& tokenizer_hash,
                         const std::vector<std::int32_t>& prompt_tokens,
                         std::string_view canonical_config);

class ResultCache {
 public:
  // Throws Error(kInvalidArgument) for invalid options (audit_fraction outside [0, 1],
  // use_redis without RedisOptions::host).
  explicit ResultCache(const ResultCacheOptions& options, const RedisOptions& redis = {},
                       std::shared_ptr<CacheClock> clock = nullptr);
  // Explicit tiers, either may be null (tests).
  ResultCache(std::unique_ptr<BlockStore> memory, std::unique_ptr<BlockStore> redis,
              double audit_fraction);
  ~ResultCache();

  bool enabled() const { return memory_ != nullptr || redis_ != nullptr; }
  // Another model purges the memory tier and switches the Redis key prefix.
  void open_model(const Hash128& model_fingerprint);

  // The cached result (cache.result_cache_hit set, timings zero) or nullopt. A Redis hit
  // is promoted to memory. Never throws.
  std::optional<GenerationResult> get(const Hash128& key);
  // Best effort; never throws. Results with a cancelled sequence are not stored.
  void put(const Hash128& key, const GenerationResult& result);

  // Whether the engine should recompute this hit and call audit(). A pure function of
  // the key and audit_fraction: the same key is always (or never) audited, and over many
  // keys the audited share is audit_fraction.
  bool should_audit(const Hash128& key) const;
  // Compares a cached result with its recomputation and counts the audit. On a mismatch
  // it logs an error, counts it, and replaces the entry with `recomputed` (the result the
  // engine must serve).
  ResultComparison audit(const Hash128& key, const GenerationResult& cached,
                         const GenerationResult& recomputed);

  void invalidate_all();
  ResultCacheStats stats() const;

 private:
  std::unique_ptr<BlockStore> memory_;
  std::unique_ptr<BlockStore> redis_;
  double audit_fraction_ = 0;
  std::atomic<std::int64_t> audits_{0};
  std::atomic<std::int64_t> mismatches_{0};
  std::atomic<std::int64_t> undecodable_memory_{0};
  std::atomic<std::int64_t> undecodable_redis_{0};
};

}  // namespace detinfer::cache
