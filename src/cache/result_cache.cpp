#include "cache/result_cache.h"

#include <utility>

#include "cache/entry_codec.h"
#include "cache/memory_store.h"
#include "cache/redis_store.h"
#include "core/check.h"
#include "core/log.h"

namespace detinfer::cache {

Hash128 result_cache_key(const Hash128& model_fingerprint, NumericsMode mode,
                         std::uint32_t spec_version, const Hash128& tokenizer_hash,
                         const std::vector<std::int32_t>& prompt_tokens,
                         std::string_view canonical_config) {
  Hasher h;
  h.update_hash(model_fingerprint)
      .update_u32(static_cast<std::uint32_t>(mode))
      .update_u32(spec_version)
      .update_hash(tokenizer_hash)
      .update_u64(prompt_tokens.size());
  for (std::int32_t t : prompt_tokens) h.update_u32(static_cast<std::uint32_t>(t));
  h.update_field(canonical_config);
  return h.digest128();
}

namespace {
void check_fraction(double f) {
  if (!(f >= 0.0 && f <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "result cache: audit_fraction must be in [0, 1], got ", f);
  }
}
}  // namespace

ResultCache::ResultCache(const ResultCacheOptions& options, const RedisOptions& redis,
                         std::shared_ptr<CacheClock> clock)
    : audit_fraction_(options.audit_fraction) {
  check_fraction(options.audit_fraction);
  if (!options.enabled) return;
  memory_ = std::make_unique<MemoryStore>(options.memory_budget_bytes, options.ttl_seconds, clock);
  if (options.use_redis) {
    if (redis.host.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "result cache: use_redis is set but RedisOptions::host is empty");
    }
    const double ttl = options.ttl_seconds > 0 ? options.ttl_seconds : 3600.0;
    redis_ = std::make_unique<RedisStore>(
        redis, options.redis_key_prefix, static_cast<std::int32_t>(ttl), kResultMagic, 60.0, clock);
  }
}

ResultCache::ResultCache(std::unique_ptr<BlockStore> memory, std::unique_ptr<BlockStore> redis,
                         double audit_fraction)
    : memory_(std::move(memory)), redis_(std::move(redis)), audit_fraction_(audit_fraction) {
  check_fraction(audit_fraction);
}

ResultCache::~ResultCache() = default;

void ResultCache::open_model(const Hash128& model_fingerprint) {
  if (memory_) memory_->open_model(model_fingerprint);
  if (redis_) redis_->open_model(model_fingerprint);
}

std::optional<GenerationResult> ResultCache::get(const Hash128& key) {
  BytesPtr bytes;
  BlockStore* from = nullptr;
  for (BlockStore* s : {memory_.get(), redis_.get()}) {
    if (s != nullptr && (bytes = s->get(key, 0))) {
      from = s;
      break;
    }
  }
  if (!bytes) return std::nullopt;
  GenerationResult r;
  try {
    r = deserialize_result(*bytes);
  } catch (const Error& e) {
    // Checksummed in Redis and never modified in memory: only a format change gets here.
    ++(from == memory_.get() ? undecodable_memory_ : undecodable_redis_);
    logger().warn("result cache: dropping undecodable {} entry {}: {}", from->name(), key.hex(),
                  e.message());
    from->erase(key);
    return std::nullopt;
  }
  if (from == redis_.get() && memory_) memory_->put(key, bytes);
  r.cache.result_cache_hit = true;
  return r;
}

void ResultCache::put(const Hash128& key, const GenerationResult& result) {
  if (!enabled()) return;
  // A cancelled request's output depends on when it was cancelled, not only on the key.
  for (const Sequence& s : result.sequences) {
    if (s.finish_reason == FinishReason::kCancelled) return;
  }
  auto bytes = std::make_shared<const Bytes>(serialize_result(result));
  if (memory_) memory_->put(key, bytes);
  if (redis_) redis_->put(key, bytes);
}

bool ResultCache::should_audit(const Hash128& key) const {
  if (audit_fraction_ <= 0.0) return false;
  if (audit_fraction_ >= 1.0) return true;
  // The key's bits are uniform: its top 53 bits as a number in [0, 1).
  const double u = static_cast<double>(key.high >> 11) * 0x1.0p-53;
  return u < audit_fraction_;
}

ResultComparison ResultCache::audit(const Hash128& key, const GenerationResult& cached,
                                    const GenerationResult& recomputed) {
  ++audits_;
  ResultComparison c = compare_results(cached, recomputed);
  if (!c.equal) {
    ++mismatches_;
    logger().error("result cache audit mismatch for key {}: {}; serving the recomputed result",
                   key.hex(), c.first_difference);
    put(key, recomputed);
  }
  return c;
}

void ResultCache::invalidate_all() {
  if (memory_) memory_->invalidate_all();
  if (redis_) redis_->invalidate_all();
}

ResultCacheStats ResultCache::stats() const {
  ResultCacheStats s;
  if (memory_) s.memory = memory_->stats();
  if (redis_) s.redis = redis_->stats();
  s.memory.corrupt += undecodable_memory_.load();
  s.redis.corrupt += undecodable_redis_.load();
  s.audits = audits_.load();
  s.audit_mismatches = mismatches_.load();
  return s;
}

}  // namespace detinfer::cache
