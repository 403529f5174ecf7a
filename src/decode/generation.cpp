// Definitions for include/detinfer/generation.h.
#include "detinfer/generation.h"

namespace detinfer {

const char* to_string(FinishReason r) {
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

}  // namespace detinfer
