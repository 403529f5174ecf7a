#include "cache/cache_clock.h"

#include <chrono>
#include <mutex>
#include <string>

#include "core/log.h"

namespace detinfer::cache {

namespace {
class SteadyCacheClock final : public CacheClock {
 public:
  std::int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
}  // namespace

std::shared_ptr<CacheClock> steady_cache_clock() {
  static const std::shared_ptr<CacheClock> clock = std::make_shared<SteadyCacheClock>();
  return clock;
}

RateLimitedLog::RateLimitedLog(std::shared_ptr<CacheClock> clock, double interval_seconds)
    : clock_(clock ? std::move(clock) : steady_cache_clock()),
      interval_ms_(static_cast<std::int64_t>(interval_seconds * 1000.0)) {}

bool RateLimitedLog::admit(std::int64_t* suppressed) {
  std::lock_guard<std::mutex> g(mu_);
  const std::int64_t now = clock_->now_ms();
  if (logged_ && now - last_ms_ < interval_ms_) {
    ++suppressed_;
    return false;
  }
  logged_ = true;
  last_ms_ = now;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

void RateLimitedLog::emit(spdlog::level::level_enum level, const std::string& what) {
  std::int64_t suppressed = 0;
  if (!admit(&suppressed)) return;
  if (suppressed > 0) {
    logger().log(level, "{} ({} similar messages suppressed)", what, suppressed);
  } else {
    logger().log(level, "{}", what);
  }
}

void RateLimitedLog::warn(const std::string& what) { emit(spdlog::level::warn, what); }
void RateLimitedLog::error(const std::string& what) { emit(spdlog::level::err, what); }

}  // namespace detinfer::cache
