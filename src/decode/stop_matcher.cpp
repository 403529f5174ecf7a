#include "decode/stop_matcher.h"

#include <algorithm>

namespace detinfer::decode {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {}

StopMatcher::Result StopMatcher::push(const std::string& piece) {
  Result r;
  if (stopped_) return r;
  pending_ += piece;
  // The earliest match of any stop string wins.
  std::size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    r.emit = pending_.substr(0, first);
    r.stopped = stopped_ = true;
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  std::size_t hold = 0;
  for (const std::string& s : stops_) {
    const std::size_t max_len = std::min(s.size() - 1, pending_.size());
    for (std::size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  r.emit = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  return out;
}

}  // namespace detinfer::decode
