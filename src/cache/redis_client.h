// A small synchronous hiredis client for the cache tiers: binary-safe GET/SET EX/DEL with
// connect and command timeouts, and reconnection with exponential backoff. While the
// server is down every call returns kUnavailable at once (no waiting), so a dead Redis
// costs a request at most one timeout per backoff period.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cache/cache_clock.h"
#include "detinfer/cache_options.h"

struct redisContext;

namespace detinfer::cache {

class RedisClient {
 public:
  enum class Status : std::uint8_t {
    kOk = 0,
    kMissing,      // GET of an absent key
    kUnavailable,  // not connected (waiting out the backoff); nothing was sent
    kError,        // the command failed (timeout, connection lost, error reply)
  };

  // Does not connect yet: the first command does. `what` names the user in log lines.
  RedisClient(const RedisOptions& options, std::string what, double error_log_interval_seconds,
              std::shared_ptr<CacheClock> clock = nullptr);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  Status get(const std::string& key, std::string* value);
  Status set(const std::string& key, const std::string& value, std::int32_t ttl_seconds);
  Status del(const std::string& key);
  // kOk when the key exists, kMissing when it does not.
  Status exists(const std::string& key);

  // Failed connection attempts and failed commands.
  std::int64_t errors() const;

 private:
  // Connects if needed and allowed by the backoff: kOk when connected, kUnavailable while
  // waiting out the backoff, kError when this attempt failed.
  Status connect_locked();
  void on_failure_locked(const std::string& what);

  const RedisOptions options_;
  const std::string what_;
  std::shared_ptr<CacheClock> clock_;
  RateLimitedLog log_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::int64_t next_attempt_ms_ = 0;
  std::int64_t backoff_ms_ = 0;
  std::int64_t errors_ = 0;
};

}  // namespace detinfer::cache
