// The fingerprint log of the `detinfer` tools: every request's RunFingerprint as one
// JSON line, appended to a file that is rotated by size so that a long-running server
// never fills its disk (FILE -> FILE.1 -> ... -> FILE.<keep>, the oldest deleted).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "session_flags.h"

namespace detinfer_cli {

class RotatingLineFile {
 public:
  // Opens `path` for append; Error(kUnavailable) naming it when it cannot be opened, and
  // Error(kInvalidArgument) for max_bytes < 1 or keep outside [0, 1000].
  explicit RotatingLineFile(const FingerprintLogOptions& options);
  // Appends `line` and a newline, rotating first when the file would pass max_bytes (a
  // single line longer than max_bytes is still written, alone in its file). Thread-safe.
  void write(const std::string& line);

 private:
  void rotate();
  FingerprintLogOptions o_;
  std::mutex mu_;
  std::ofstream out_;
  std::int64_t size_ = 0;
};

// When config.fingerprint_log.path is set: opens the log and points the session's
// recorder callback at it (chaining any callback already there). Returns the file, which
// must outlive the session; nullptr without a path.
std::shared_ptr<RotatingLineFile> attach_fingerprint_log(ToolConfig& config);

}  // namespace detinfer_cli
