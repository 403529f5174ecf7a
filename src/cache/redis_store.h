// Redis tier: entries framed like the disk tier (entry_codec.h) under
// <key_prefix><model fingerprint hex>:<key hex>, stored with SET ... EX ttl. Shared by
// every process pointing at the same server. Any failure is a miss.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cache/block_store.h"
#include "cache/entry_codec.h"
#include "cache/redis_client.h"

namespace detinfer::cache {

// Thread-safe (one connection, serialized).
class RedisStore final : public BlockStore {
 public:
  RedisStore(const RedisOptions& options, std::string key_prefix, std::int32_t ttl_seconds,
             const EntryMagic& magic, double error_log_interval_seconds = 60,
             std::shared_ptr<CacheClock> clock = nullptr);

  const char* name() const override { return "redis"; }
  BytesPtr get(const Hash128& key, std::size_t expected_size) override;
  void put(const Hash128& key, const BytesPtr& payload) override;
  bool contains(const Hash128& key) override;
  void erase(const Hash128& key) override;
  // Redis entries are shared with other processes and expire by TTL: nothing to drop here.
  void invalidate_all() override {}
  void open_model(const Hash128& model_fingerprint) override;
  CacheTierStats stats() const override;

  // The Redis key of an entry under the current model.
  std::string redis_key(const Hash128& key) const;

 private:
  const std::string prefix_;
  const std::int32_t ttl_seconds_;
  const EntryMagic magic_;
  RateLimitedLog log_;
  RedisClient client_;
  mutable std::mutex mu_;
  std::string model_hex_ = std::string(32, '0');
  CacheTierStats stats_;
};

}  // namespace detinfer::cache
