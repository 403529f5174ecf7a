// DeterministicSession's caches, metrics and replay: thin forwarding to SessionServices.
#include <sstream>

#include "detinfer/session.h"
#include "session/session_impl.h"
#include "session/session_services.h"

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

MetricsRegistry& DeterministicSession::metrics() { return impl_->services->registry(); }
std::string DeterministicSession::metrics_text() const { return impl_->services->metrics_text(); }
CacheStats DeterministicSession::cache_stats() const { return impl_->services->cache_stats(); }
void DeterministicSession::invalidate_caches() { impl_->services->invalidate_caches(); }
ConsistencyStats DeterministicSession::consistency_stats() const {
  return impl_->services->consistency_stats();
}

ReplayReport DeterministicSession::replay(const RunFingerprint& fingerprint) {
  return impl_->services->replay(fingerprint);
}
ReplayReport DeterministicSession::replay(const std::string& fingerprint_json) {
  return replay(RunFingerprint::from_json(fingerprint_json));
}

}  // namespace detinfer
