// Internal access to the "detinfer" spdlog logger.
#pragma once

#include <spdlog/spdlog.h>

namespace detinfer {
spdlog::logger& logger();
}  // namespace detinfer
