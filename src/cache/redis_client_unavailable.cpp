// RedisClient for a build without hiredis (DETINFER_WITH_REDIS=OFF, or AUTO and not
// found): constructing one, i.e. enabling a Redis tier of the KV-prefix or result cache,
// is Error(kUnsupported) at session open.
#include <utility>

#include "cache/redis_client.h"
#include "core/check.h"

namespace detinfer::cache {

RedisClient::RedisClient(const RedisOptions& options, std::string what, double,
                         std::shared_ptr<CacheClock>)
    : options_(options), what_(std::move(what)), log_(nullptr, 0) {
  throw Error(ErrorCode::kUnsupported,
              what_ +
                  ": the Redis tier needs hiredis, and this detinfer was built without it "
                  "(DETINFER_WITH_REDIS=OFF); use the memory or disk tier",
              "redis");
}

RedisClient::~RedisClient() = default;

// Unreachable (the constructor throws); defined so that the tiers link.
RedisClient::Status RedisClient::get(const std::string&, std::string*) {
  return Status::kUnavailable;
}
RedisClient::Status RedisClient::set(const std::string&, const std::string&, std::int32_t) {
  return Status::kUnavailable;
}
RedisClient::Status RedisClient::del(const std::string&) { return Status::kUnavailable; }
RedisClient::Status RedisClient::exists(const std::string&) { return Status::kUnavailable; }
std::int64_t RedisClient::errors() const { return errors_; }

}  // namespace detinfer::cache
