#include "session/cache_bridge.h"

#include <utility>

#include "cache/prefix_pool.h"
#include "cache/result_codec.h"
#include "core/log.h"
#include "detinfer/hash.h"
#include "detinfer/numerics.h"
#include "detinfer/version.h"

namespace detinfer::session {

bool has_cancelled(const GenerationResult& r) {
  for (const Sequence& s : r.sequences) {
    if (s.finish_reason == FinishReason::kCancelled) return true;
  }
  return false;
}

namespace {
// Hands a cached result to the caller's callback as the engine hands a finished beam
// search: every token once, the whole text with the first.
void stream_cached(const engine::EngineRequest& r, const GenerationResult& result) {
  if (!r.on_token) return;
  for (std::size_t i = 0; i < result.sequences.size(); ++i) {
    const Sequence& s = result.sequences[i];
    for (std::size_t t = 0; t < s.tokens.size(); ++t) {
      TokenEvent ev;
      ev.token = s.tokens[t];
      if (t == 0) ev.text = s.text;
      ev.logprobs = t < s.logprobs.size() ? &s.logprobs[t] : nullptr;
      ev.sample_index = static_cast<std::int32_t>(i);
      ev.step = static_cast<std::int32_t>(t);
      if (!r.on_token(ev)) return;  // the result is complete already; stop streaming
    }
  }
}
}  // namespace

CacheBridge::CacheBridge(const SessionOptions& o, const model::Model& model,
                         const NumericsIdentity& numerics, const Hash128& tokenizer_hash)
    : model_(model),
      tokenizer_hash_(tokenizer_hash),
      numerics_(numerics),
      prefix_salt_(prefix_salt(numerics, o.cache_salt)) {
  if (o.cache.prefix.enabled) {
    prefix_ = std::make_unique<cache::PrefixCache>(o.cache.prefix, o.cache.redis);
  }
  if (o.cache.result.enabled) {
    results_ = std::make_unique<cache::ResultCache>(o.cache.result, o.cache.redis);
    results_->open_model(model.fingerprint());
    serve_results_ = numerics_.mode == NumericsMode::kCanonical;
  }
}

// --- result cache -------------------------------------------------------------------------

Hash128 CacheBridge::result_key(const engine::EngineRequest& r) const {
  return identity_result_key(numerics_, model_.fingerprint(), tokenizer_hash_, r.prompt,
                             cache::canonical_generation_config(r.config));
}

std::optional<GenerationResult> CacheBridge::lookup(const engine::EngineRequest& r) {
  if (!serve_results_ || !r.use_caches) return std::nullopt;
  std::optional<GenerationResult> hit;
  Hash128 key;
  try {
    key = result_key(r);
    hit = results_->get(key);
  } catch (const Error& e) {
    logger().warn("result cache: lookup of request {} skipped: {}", r.id, e.what());
    return std::nullopt;
  }
  if (!hit) return std::nullopt;
  if (results_->should_audit(key)) {
    // Run it as a miss; on_finished compares and serves the recomputation.
    std::lock_guard<std::mutex> lk(mu_);
    audits_.emplace(r.id, std::move(*hit));
    return std::nullopt;
  }
  hit->prompt_tokens = r.prompt;
  hit->seed = r.seed;
  hit->cache.prefix_cached_tokens = 0;
  hit->cache.result_cache_hit = true;
  stream_cached(r, *hit);
  return hit;
}

void CacheBridge::forget(std::uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  audits_.erase(id);
}

void CacheBridge::on_finished(const engine::EngineRequest& r, GenerationResult& result) {
  if (!serve_results_ || !r.use_caches) return;
  std::optional<GenerationResult> audited;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto a = audits_.find(r.id);
    if (a != audits_.end()) {
      audited = std::move(a->second);
      audits_.erase(a);
    }
  }
  try {
    const Hash128 key = result_key(r);
    if (audited) {
      results_->audit(key, *audited, result);  // on a mismatch the recomputed one is stored
    } else if (!has_cancelled(result)) {
      results_->put(key, result);
    }
  } catch (const Error& e) {
    logger().warn("result cache: request {} not stored: {}", r.id, e.what());
  }
}

void CacheBridge::on_failed(const engine::EngineRequest& r, const Error&) { forget(r.id); }

// --- prefix cache -------------------------------------------------------------------------

std::int64_t CacheBridge::restore(const engine::EngineRequest& r, model::KvCachePool& pool,
                                  std::vector<std::int32_t>& table) {
  std::call_once(prefix_opened_, [&] {
    prefix_->open(
        prefix_namespace(numerics_, model_.fingerprint(), pool.block_size(), pool.block_bytes()));
  });
  if (!r.use_caches) return 0;  // replays recompute everything: they check the output
  return cache::restore_prefix_blocks(*prefix_, r.prompt, prefix_salt_, pool, table);
}

void CacheBridge::publish(const engine::EngineRequest& r, const model::KvCachePool& pool,
                          const std::vector<std::int32_t>& table) {
  // restore() always runs first for a request and opens the namespace.
  if (r.use_caches) cache::publish_prefix_blocks(*prefix_, r.prompt, prefix_salt_, pool, table);
}

void CacheBridge::publish_sequence(const engine::EngineRequest& r,
                                   const std::vector<std::int32_t>& tokens,
                                   const model::KvCachePool& pool,
                                   const std::vector<std::int32_t>& table) {
  if (r.use_caches) cache::publish_prefix_blocks(*prefix_, tokens, prefix_salt_, pool, table);
}

std::int64_t CacheBridge::restore_sequence(const engine::EngineRequest& r,
                                           const std::vector<std::int32_t>& tokens,
                                           model::KvCachePool& pool,
                                           std::vector<std::int32_t>& table) {
  // The request's restore() ran at its first admission and opened the namespace.
  if (!r.use_caches) return 0;
  return cache::restore_prefix_blocks(*prefix_, tokens, prefix_salt_, pool, table);
}

// --- stats --------------------------------------------------------------------------------

CacheStats CacheBridge::stats() const {
  CacheStats s;
  if (prefix_) s.prefix = prefix_->stats();
  if (results_) s.result = results_->stats();
  return s;
}

void CacheBridge::invalidate() {
  if (prefix_) prefix_->invalidate_all();
  if (results_) results_->invalidate_all();
}

}  // namespace detinfer::session
