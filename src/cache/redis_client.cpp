#include "cache/redis_client.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/check.h"

namespace detinfer::cache {

namespace {
timeval to_timeval(std::int32_t ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

void check_options(const RedisOptions& o) {
  if (o.port < 1 || o.port > 65535) {
    fail(ErrorCode::kInvalidArgument, "cache redis: port must be 1..65535, got ", o.port);
  }
  if (o.connect_timeout_ms < 1 || o.command_timeout_ms < 1) {
    fail(ErrorCode::kInvalidArgument,
         "cache redis: connect_timeout_ms and command_timeout_ms must be >= 1, got ",
         o.connect_timeout_ms, " and ", o.command_timeout_ms);
  }
  if (o.reconnect_backoff_min_ms < 0 || o.reconnect_backoff_max_ms < o.reconnect_backoff_min_ms) {
    fail(ErrorCode::kInvalidArgument,
         "cache redis: need 0 <= reconnect_backoff_min_ms <= reconnect_backoff_max_ms, got ",
         o.reconnect_backoff_min_ms, " and ", o.reconnect_backoff_max_ms);
  }
}
}  // namespace

RedisClient::RedisClient(const RedisOptions& options, std::string what,
                         double error_log_interval_seconds, std::shared_ptr<CacheClock> clock)
    : options_(options),
      what_(std::move(what)),
      clock_(clock ? std::move(clock) : steady_cache_clock()),
      log_(clock_, error_log_interval_seconds) {
  check_options(options);
  backoff_ms_ = options.reconnect_backoff_min_ms;
}

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

std::int64_t RedisClient::errors() const {
  std::lock_guard<std::mutex> g(mu_);
  return errors_;
}

void RedisClient::on_failure_locked(const std::string& what) {
  ++errors_;
  log_.warn(str_cat(what_, ": redis ", options_.host, ":", options_.port, " ", what,
                    "; treating as a miss, retrying in ", backoff_ms_, " ms"));
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  next_attempt_ms_ = clock_->now_ms() + backoff_ms_;
  backoff_ms_ = std::min<std::int64_t>(std::max<std::int64_t>(backoff_ms_ * 2, 1),
                                       options_.reconnect_backoff_max_ms);
}

RedisClient::Status RedisClient::connect_locked() {
  if (ctx_ != nullptr) return Status::kOk;
  if (clock_->now_ms() < next_attempt_ms_) return Status::kUnavailable;
  redisContext* c = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                            to_timeval(options_.connect_timeout_ms));
  if (c == nullptr || c->err != 0) {
    const std::string why = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    on_failure_locked("connect failed: " + why);
    return Status::kError;
  }
  if (redisSetTimeout(c, to_timeval(options_.command_timeout_ms)) != REDIS_OK) {
    redisFree(c);
    on_failure_locked("setting the command timeout failed");
    return Status::kError;
  }
  ctx_ = c;
  backoff_ms_ = options_.reconnect_backoff_min_ms;
  return Status::kOk;
}

namespace {
// hiredis writes with write(2): a write to a connection the server has dropped raises
// SIGPIPE, whose default action kills the process. Blocks it on this thread while a
// command runs and discards one raised meanwhile, so a dying Redis is only an error.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeGuard() {
    if (!blocked_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

// Runs one command given as binary-safe arguments; nullptr when the connection failed.
Reply run(redisContext* c, const std::vector<std::pair<const char*, std::size_t>>& args) {
  const SigpipeGuard guard;
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.first);
    lens.push_back(a.second);
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}
}  // namespace

RedisClient::Status RedisClient::get(const std::string& key, std::string* value) {
  std::lock_guard<std::mutex> g(mu_);
  if (const Status s = connect_locked(); s != Status::kOk) return s;
  Reply r = run(ctx_, {{"GET", 3}, {key.data(), key.size()}});
  if (!r) {
    on_failure_locked(str_cat("GET failed: ", ctx_->errstr));
    return Status::kError;
  }
  if (r->type == REDIS_REPLY_NIL) return Status::kMissing;
  if (r->type != REDIS_REPLY_STRING) {
    on_failure_locked(str_cat("GET: unexpected reply type ", r->type,
                              r->type == REDIS_REPLY_ERROR ? std::string(": ") + r->str : ""));
    return Status::kError;
  }
  value->assign(r->str, r->len);
  return Status::kOk;
}

RedisClient::Status RedisClient::set(const std::string& key, const std::string& value,
                                     std::int32_t ttl_seconds) {
  std::lock_guard<std::mutex> g(mu_);
  if (const Status s = connect_locked(); s != Status::kOk) return s;
  const std::string ttl = std::to_string(std::max<std::int32_t>(ttl_seconds, 1));
  Reply r = run(ctx_, {{"SET", 3},
                       {key.data(), key.size()},
                       {value.data(), value.size()},
                       {"EX", 2},
                       {ttl.data(), ttl.size()}});
  if (!r) {
    on_failure_locked(str_cat("SET failed: ", ctx_->errstr));
    return Status::kError;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    // e.g. OOM with maxmemory: the server is fine, the entry is just not stored.
    ++errors_;
    log_.warn(str_cat(what_, ": redis SET error: ", std::string(r->str, r->len)));
    return Status::kError;
  }
  return Status::kOk;
}

RedisClient::Status RedisClient::del(const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  if (const Status s = connect_locked(); s != Status::kOk) return s;
  Reply r = run(ctx_, {{"DEL", 3}, {key.data(), key.size()}});
  if (!r) {
    on_failure_locked(str_cat("DEL failed: ", ctx_->errstr));
    return Status::kError;
  }
  return r->type == REDIS_REPLY_ERROR ? Status::kError : Status::kOk;
}

RedisClient::Status RedisClient::exists(const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  if (const Status s = connect_locked(); s != Status::kOk) return s;
  Reply r = run(ctx_, {{"EXISTS", 6}, {key.data(), key.size()}});
  if (!r) {
    on_failure_locked(str_cat("EXISTS failed: ", ctx_->errstr));
    return Status::kError;
  }
  if (r->type != REDIS_REPLY_INTEGER) return Status::kError;
  return r->integer > 0 ? Status::kOk : Status::kMissing;
}

}  // namespace detinfer::cache
