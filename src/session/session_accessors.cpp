// DeterministicSession's caches, metrics and replay: thin forwarding to the pipeline's
// stages (session_impl.h).
#include <sstream>

#include "detinfer/session.h"
#include "session/session_impl.h"

namespace detinfer {

const char* to_string(ReplayVerdict v) {
  switch (v) {
    case ReplayVerdict::kReproduced:
      return "reproduced";
    case ReplayVerdict::kDiverged:
      return "diverged";
    case ReplayVerdict::kRefused:
      return "refused";
  }
  return "unknown";
}

std::string ReplayReport::to_text() const {
  std::ostringstream os;
  os << "replay: " << to_string(verdict) << "\n";
  if (!reason.empty()) os << "reason: " << reason << "\n";
  if (verdict != ReplayVerdict::kRefused) os << diff.to_text();
  return os.str();
}

MetricsRegistry& DeterministicSession::metrics() { return impl_->telemetry->registry(); }
std::string DeterministicSession::metrics_text() const { return impl_->telemetry->metrics_text(); }
CacheStats DeterministicSession::cache_stats() const { return impl_->caches->stats(); }
void DeterministicSession::invalidate_caches() { impl_->caches->invalidate(); }
ConsistencyStats DeterministicSession::consistency_stats() const {
  return impl_->monitor ? impl_->monitor->stats() : ConsistencyStats{};
}

ReplayReport DeterministicSession::replay(const RunFingerprint& fingerprint) {
  return impl_->replayer->replay(fingerprint);
}
ReplayReport DeterministicSession::replay(const std::string& fingerprint_json) {
  return replay(RunFingerprint::from_json(fingerprint_json));
}

}  // namespace detinfer
