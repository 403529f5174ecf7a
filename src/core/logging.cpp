#include "detinfer/logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "core/check.h"
#include "core/log.h"

namespace detinfer {

namespace {
spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kCritical:
      return spdlog::level::critical;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

LogLevel from_spdlog(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return LogLevel::kTrace;
    case spdlog::level::debug:
      return LogLevel::kDebug;
    case spdlog::level::info:
      return LogLevel::kInfo;
    case spdlog::level::warn:
      return LogLevel::kWarn;
    case spdlog::level::err:
      return LogLevel::kError;
    case spdlog::level::critical:
      return LogLevel::kCritical;
    default:
      return LogLevel::kOff;
  }
}

// stderr, or the application's callback when one is set. base_sink's mutex serializes
// records, so the callback sees one at a time.
class CallbackOrStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_callback(LogCallback callback) {
    std::lock_guard<std::mutex> g(mutex_);
    callback_ = std::move(callback);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!callback_) {
      stderr_.log(msg);
      return;
    }
    try {
      callback_(from_spdlog(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
    } catch (...) {  // never propagate into the logging call site
    }
  }
  void flush_() override {
    if (!callback_) stderr_.flush();
  }

 private:
  LogCallback callback_;
  spdlog::sinks::stderr_color_sink_st stderr_;
};

// Created before the logger (make_logger asks for it), so destroyed after it.
const std::shared_ptr<CallbackOrStderrSink>& sink() {
  static const auto instance = std::make_shared<CallbackOrStderrSink>();
  return instance;
}

std::shared_ptr<spdlog::logger> make_logger() {
  // A private logger, not registered globally, so that an application's own spdlog
  // setup is left alone.
  auto lg = std::make_shared<spdlog::logger>("detinfer", sink());
  LogLevel level = LogLevel::kWarn;
  if (const char* env = std::getenv("DETINFER_LOG_LEVEL"); env != nullptr && *env != '\0') {
    try {
      level = parse_log_level(env);
    } catch (const Error&) {
      lg->warn("ignoring invalid DETINFER_LOG_LEVEL='{}'", env);
    }
  }
  lg->set_level(to_spdlog(level));
  return lg;
}
}  // namespace

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

void set_log_level(LogLevel level) { logger().set_level(to_spdlog(level)); }

LogLevel log_level() { return from_spdlog(logger().level()); }

void set_log_callback(LogCallback callback) {
  logger();  // the logger and its sink exist from here on
  sink()->set_callback(std::move(callback));
}

LogLevel parse_log_level(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "trace") return LogLevel::kTrace;
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "error" || s == "err") return LogLevel::kError;
  if (s == "critical") return LogLevel::kCritical;
  if (s == "off") return LogLevel::kOff;
  fail(ErrorCode::kInvalidArgument, "unknown log level '", name,
       "' (expected trace, debug, info, warn, error, critical or off)");
}

}  // namespace detinfer
