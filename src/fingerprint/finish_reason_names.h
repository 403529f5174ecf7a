// Names of FinishReason as fingerprints and diffs spell them.
#pragma once

#include <optional>
#include <string_view>

#include "detinfer/generation.h"

namespace detinfer::fingerprint_detail {

inline const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

inline std::optional<FinishReason> parse_finish_reason(std::string_view name) {
  for (FinishReason r : {FinishReason::kLength, FinishReason::kStop, FinishReason::kCancelled}) {
    if (name == finish_reason_name(r)) return r;
  }
  return std::nullopt;
}

}  // namespace detinfer::fingerprint_detail
