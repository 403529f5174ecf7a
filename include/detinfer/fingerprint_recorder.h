// FingerprintRecorder: writes the RunFingerprint of each finished request as one JSON
// line to a file and/or hands it to a callback (docs/fingerprint.md, "Recorder").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "detinfer/export.h"
#include "detinfer/fingerprint.h"

namespace detinfer {

struct DETINFER_API RecorderOptions {
  RecordLevel level = RecordLevel::kOff;  // RecordLevel: detinfer/fingerprint.h
  // JSON Lines file, opened for append; empty = no file.
  std::string path;
  // Called with each fingerprint and its JSON line (without the newline), on the thread
  // that calls record(). Exceptions it throws propagate to that caller.
  std::function<void(const RunFingerprint&, const std::string& json_line)> callback;
  // false: the request group keeps only the prompt's hash and length.
  bool store_prompt_tokens = true;
};

// Thread-safe: concurrent record() calls write whole lines, never interleaved.
// Deprecated: the session records (SessionOptions::fingerprint).
class DETINFER_API DETINFER_DEPRECATED_MACHINERY FingerprintRecorder {
 public:
  // Opens the file (Error(kUnavailable) naming it when it cannot be opened).
  explicit FingerprintRecorder(RecorderOptions options);
  ~FingerprintRecorder();
  FingerprintRecorder(const FingerprintRecorder&) = delete;
  FingerprintRecorder& operator=(const FingerprintRecorder&) = delete;

  RecordLevel level() const;
  bool enabled() const { return level() != RecordLevel::kOff; }
  // What the session must collect while decoding.
  bool wants_step_digests() const { return level() >= RecordLevel::kSteps; }
  bool wants_logits() const { return level() == RecordLevel::kLogits; }

  // Trims `fp` to the level (drops step digests below kSteps and logits below kLogits;
  // drops prompt ids when !store_prompt_tokens), recomputes chain digests from the step
  // digests when present, writes the line and calls the callback. Returns the JSON line
  // (for GenerationResult::fingerprint_json); empty when the level is kOff. Throws
  // Error(kUnavailable) naming the file when a write fails.
  std::string record(RunFingerprint fp);

  // Lines written so far.
  std::uint64_t records() const;

 private:
  struct DETINFER_LOCAL Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detinfer
