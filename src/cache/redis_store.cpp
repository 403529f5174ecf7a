#include "cache/redis_store.h"

#include <utility>

#include "core/check.h"

namespace detinfer::cache {

RedisStore::RedisStore(const RedisOptions& options, std::string key_prefix,
                       std::int32_t ttl_seconds, const EntryMagic& magic,
                       double error_log_interval_seconds, std::shared_ptr<CacheClock> clock)
    : prefix_(std::move(key_prefix)),
      ttl_seconds_(ttl_seconds),
      magic_(magic),
      log_(clock, error_log_interval_seconds),
      client_(options, "cache redis tier '" + prefix_ + "'", error_log_interval_seconds, clock) {
  if (ttl_seconds < 1) {
    fail(ErrorCode::kInvalidArgument, "cache redis tier: ttl_seconds must be >= 1, got ",
         ttl_seconds);
  }
}

void RedisStore::open_model(const Hash128& model_fingerprint) {
  std::lock_guard<std::mutex> g(mu_);
  model_hex_ = model_fingerprint.hex();
}

std::string RedisStore::redis_key(const Hash128& key) const {
  std::lock_guard<std::mutex> g(mu_);
  return prefix_ + model_hex_ + ":" + key.hex();
}

BytesPtr RedisStore::get(const Hash128& key, std::size_t expected_size) {
  const std::string rkey = redis_key(key);
  std::string value;
  const RedisClient::Status s = client_.get(rkey, &value);
  std::unique_lock<std::mutex> g(mu_);
  if (s != RedisClient::Status::kOk) {
    if (s == RedisClient::Status::kError) ++stats_.backend_errors;
    ++stats_.misses;
    return nullptr;
  }
  auto payload = std::make_shared<Bytes>();
  const EntryStatus st =
      decode_entry(value.data(), value.size(), magic_, key, expected_size, payload.get());
  if (st == EntryStatus::kOk) {
    ++stats_.hits;
    return payload;
  }
  ++stats_.corrupt;
  ++stats_.misses;
  g.unlock();
  log_.warn(str_cat("cache redis tier: deleting corrupt entry '", rkey, "': ", to_string(st)));
  client_.del(rkey);
  return nullptr;
}

void RedisStore::put(const Hash128& key, const BytesPtr& payload) {
  if (!payload) return;
  const RedisClient::Status s =
      client_.set(redis_key(key), encode_entry(magic_, key, *payload), ttl_seconds_);
  std::lock_guard<std::mutex> g(mu_);
  if (s == RedisClient::Status::kOk) {
    ++stats_.insertions;
  } else {
    if (s == RedisClient::Status::kError) ++stats_.backend_errors;
    ++stats_.rejected;
  }
}

bool RedisStore::contains(const Hash128& key) {
  return client_.exists(redis_key(key)) == RedisClient::Status::kOk;
}

void RedisStore::erase(const Hash128& key) { client_.del(redis_key(key)); }

CacheTierStats RedisStore::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

}  // namespace detinfer::cache
