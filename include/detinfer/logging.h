// detinfer logs through an spdlog logger named "detinfer" that writes to stderr, never
// stdout. Its level comes from DETINFER_LOG_LEVEL (trace, debug, info, warn, error,
// critical, off; default warn) unless set here.
#pragma once

#include <cstdint>
#include <string_view>

#include "detinfer/export.h"

namespace detinfer {

enum class LogLevel : std::uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

DETINFER_API void set_log_level(LogLevel level);
DETINFER_API LogLevel log_level();
// Parses a level name (case-insensitive); throws Error(kInvalidArgument) on others.
DETINFER_API LogLevel parse_log_level(std::string_view name);

}  // namespace detinfer
