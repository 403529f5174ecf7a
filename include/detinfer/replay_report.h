// ReplayReport: the verdict of DeterministicSession::replay(fingerprint) — the recorded
// request re-run on a session and every step digest compared (docs/session.md, "Replay").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "detinfer/export.h"
#include "detinfer/fingerprint.h"
#include "detinfer/fingerprint_diff.h"

namespace detinfer {

enum class ReplayVerdict : std::uint8_t {
  kReproduced = 0,  // same tokens, finish reasons and every recorded digest, same mode
  kDiverged = 1,    // ran, but the output differs (diff.divergence says where) or the
                    // numerics mode differs (a fast-mode match proves nothing)
  kRefused = 2,     // not run: model or tokenizer differ, prompt ids not recorded, or the
                    // recorded request is invalid for this model
};
DETINFER_API const char* to_string(ReplayVerdict v);

struct DETINFER_API ReplayReport {
  ReplayVerdict verdict = ReplayVerdict::kRefused;
  // Refused: why (naming the group and both values). Diverged: the first divergence or
  // the differing numerics mode. Reproduced: empty.
  std::string reason;
  FingerprintDiff diff;                    // original vs replayed (empty when refused)
  std::optional<RunFingerprint> replayed;  // the re-run's fingerprint (absent when refused)

  bool reproduced() const { return verdict == ReplayVerdict::kReproduced; }
  // Several lines: the verdict, the reason, then diff.to_text().
  std::string to_text() const;
};

}  // namespace detinfer
