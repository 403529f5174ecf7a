#include "cache/prefix_cache.h"

#include <cstring>
#include <utility>

#include "cache/disk_store.h"
#include "cache/entry_codec.h"
#include "cache/memory_store.h"
#include "cache/redis_store.h"
#include "core/check.h"
#include "core/memory_limits.h"

namespace detinfer::cache {

PrefixCache::PrefixCache(const PrefixCacheOptions& options, const RedisOptions& redis,
                         std::shared_ptr<CacheClock> clock) {
  if (!options.enabled) return;
  if (options.memory.enabled) {
    std::int64_t budget = options.memory.budget_bytes;
    if (budget == 0) budget = core::memory_limit_bytes() / 5;
    tiers_.push_back(
        {kMemory, std::make_unique<MemoryStore>(budget, options.memory.ttl_seconds, clock)});
  }
  if (!options.disk.directory.empty()) {
    tiers_.push_back({kDisk, std::make_unique<DiskStore>(
                                 options.disk.directory, options.disk.budget_bytes, kKvBlockMagic,
                                 options.error_log_interval_seconds, clock)});
  }
  if (options.redis.enabled) {
    if (redis.host.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "prefix cache: redis tier enabled but RedisOptions::host is empty");
    }
    tiers_.push_back({kRedis, std::make_unique<RedisStore>(
                                  redis, options.redis.key_prefix, options.redis.ttl_seconds,
                                  kKvBlockMagic, options.error_log_interval_seconds, clock)});
  }
}

PrefixCache::PrefixCache(Tiers tiers) {
  if (tiers.memory) tiers_.push_back({kMemory, std::move(tiers.memory)});
  if (tiers.disk) tiers_.push_back({kDisk, std::move(tiers.disk)});
  if (tiers.redis) tiers_.push_back({kRedis, std::move(tiers.redis)});
}

PrefixCache::~PrefixCache() = default;

void PrefixCache::open(const PrefixNamespace& ns) {
  if (ns.block_size < 1 || ns.block_bytes < 1) {
    fail(ErrorCode::kInvalidArgument, "prefix cache: block_size and block_bytes must be >= 1, got ",
         ns.block_size, " and ", ns.block_bytes);
  }
  std::lock_guard<std::mutex> g(mu_);
  for (auto& t : tiers_) t.store->open_model(ns.model_fingerprint);
  ns_ = std::make_shared<const PrefixNamespace>(ns);
}

std::shared_ptr<const PrefixNamespace> PrefixCache::current() const {
  std::lock_guard<std::mutex> g(mu_);
  return ns_;
}

PrefixMatch PrefixCache::lookup(const std::vector<std::int32_t>& tokens, std::string_view salt,
                                std::size_t max_blocks) {
  PrefixMatch m;
  const std::shared_ptr<const PrefixNamespace> ns = current();
  if (!ns || tiers_.empty()) return m;
  m.block_size = ns->block_size;
  m.root = prefix_root(*ns, salt);
  m.keys = prefix_block_keys(m.root, tokens.data(), tokens.size(), ns->block_size);
  if (max_blocks == kAuto) {
    max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / static_cast<std::size_t>(m.block_size);
  }
  const std::size_t want = std::min(max_blocks, m.keys.size());
  const auto bytes = static_cast<std::size_t>(ns->block_bytes);
  for (std::size_t i = 0; i < want; ++i) {
    BytesPtr found;
    std::size_t level = 0;
    for (; level < tiers_.size(); ++level) {
      found = tiers_[level].store->get(m.keys[i], bytes);
      if (found && found->size() != bytes) found.reset();  // an injected tier's bug
      if (found) {
        tokens_[tiers_[level].tier].hit += m.block_size;
        break;
      }
      tokens_[tiers_[level].tier].miss += m.block_size;
    }
    if (!found) break;
    // Promote to the faster tiers so that the next lookup stops earlier.
    for (std::size_t up = 0; up < level; ++up) tiers_[up].store->put(m.keys[i], found);
    m.blocks.push_back(std::move(found));
  }
  ++lookups_;
  lookup_tokens_ += static_cast<std::int64_t>(tokens.size());
  cached_tokens_ += m.cached_tokens();
  return m;
}

std::vector<Hash128> PrefixCache::block_keys(const std::vector<std::int32_t>& tokens,
                                             std::string_view salt) const {
  const std::shared_ptr<const PrefixNamespace> ns = current();
  if (!ns) return {};
  return prefix_block_keys(prefix_root(*ns, salt), tokens.data(), tokens.size(), ns->block_size);
}

bool PrefixCache::contains(const Hash128& key) {
  return !tiers_.empty() && tiers_.front().store->contains(key);
}

void PrefixCache::insert(const Hash128& key, BytesPtr payload) {
  const std::shared_ptr<const PrefixNamespace> ns = current();
  if (!ns || !payload) return;
  if (static_cast<std::int64_t>(payload->size()) != ns->block_bytes) {
    fail(ErrorCode::kInvalidArgument, "prefix cache: inserted block has ", payload->size(),
         " bytes, expected block_bytes = ", ns->block_bytes);
  }
  for (auto& t : tiers_) t.store->put(key, payload);
}

void PrefixCache::insert(const Hash128& key, const void* data, std::size_t size) {
  if (tiers_.empty()) return;
  const auto* p = static_cast<const std::uint8_t*>(data);
  insert(key, std::make_shared<const Bytes>(p, p + size));
}

void PrefixCache::invalidate_all() {
  for (auto& t : tiers_) t.store->invalidate_all();
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  for (const auto& t : tiers_) {
    CacheTierStats ts = t.store->stats();
    ts.hit_tokens = tokens_[t.tier].hit.load();
    ts.miss_tokens = tokens_[t.tier].miss.load();
    (t.tier == kMemory ? s.memory : t.tier == kDisk ? s.disk : s.redis) = ts;
  }
  s.lookups = lookups_.load();
  s.lookup_tokens = lookup_tokens_.load();
  s.cached_tokens = cached_tokens_.load();
  return s;
}

}  // namespace detinfer::cache
