// detinfer logs through a private logger that writes to stderr, never stdout, or to the
// application's callback (set_log_callback). Its level comes from DETINFER_LOG_LEVEL
// (trace, debug, info, warn, error, critical, off; default warn) unless set here.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "detinfer/export.h"

namespace detinfer {

enum class LogLevel : std::uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

DETINFER_API void set_log_level(LogLevel level);
DETINFER_API LogLevel log_level();
// Parses a level name (case-insensitive); throws Error(kInvalidArgument) on others.
DETINFER_API LogLevel parse_log_level(std::string_view name);

// Receives each log record that passes the level: its level and its text (no timestamp,
// no trailing newline; valid only during the call). Called on whichever thread logs
// (engine, cache, caller), one record at a time; it must not call set_log_callback.
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;
// Sends every later record to `callback` instead of stderr; an empty callback restores
// stderr. Process-wide (like llama.cpp's llama_log_set); thread-safe. An exception thrown
// by the callback is swallowed (the record is dropped).
DETINFER_API void set_log_callback(LogCallback callback);

}  // namespace detinfer
