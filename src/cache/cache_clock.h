// Time source of the caches (TTL, reconnect backoff, log rate limits). Injectable so that
// tests can move time without sleeping.
#pragma once

#include <spdlog/common.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace detinfer::cache {

class CacheClock {
 public:
  virtual ~CacheClock() = default;
  // Milliseconds on a monotonic clock; only differences matter.
  virtual std::int64_t now_ms() const = 0;
};

// std::chrono::steady_clock; shared, stateless.
std::shared_ptr<CacheClock> steady_cache_clock();

// Logs a tier failure at most once per interval, counting what it held back, so that a
// dead backend cannot flood the log. Thread-safe.
class RateLimitedLog {
 public:
  RateLimitedLog(std::shared_ptr<CacheClock> clock, double interval_seconds);
  // Logs "<what>" at warn level (with the number suppressed since the last line) if the
  // interval has passed since the last logged line.
  void warn(const std::string& what);
  void error(const std::string& what);

 private:
  bool admit(std::int64_t* suppressed);
  void emit(spdlog::level::level_enum level, const std::string& what);

  std::shared_ptr<CacheClock> clock_;
  std::int64_t interval_ms_;
  std::int64_t last_ms_ = 0;
  bool logged_ = false;
  std::int64_t suppressed_ = 0;
  std::mutex mu_;
};

}  // namespace detinfer::cache
