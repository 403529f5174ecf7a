// What a C API session adds to a DeterministicSession: Prometheus metrics and, on
// request, a run fingerprint in every result. Attached through the engine's observer
// seam (engine/engine_hooks.h, docs/session.md) when the session is opened.
#pragma once

#include <memory>
#include <string>

#include "detinfer/fingerprint.h"
#include "detinfer/fingerprint_recorder.h"
#include "detinfer/metrics.h"
#include "detinfer/session.h"
#include "engine/engine_hooks.h"

namespace detinfer::capi {

class SessionObserver : public EngineObserver {
 public:
  // level kOff: no fingerprints. The base fingerprint groups (library, numerics, device,
  // environment, model, tokenizer) are taken from the session once, here.
  SessionObserver(DeterministicSession& session, RecordLevel level);

  void on_step(const StepStats& stats) override;
  void on_finished(const EngineRequest& request, GenerationResult& result) override;
  void on_failed(const EngineRequest& request, const Error& error) override;

  // The registry in the Prometheus text format, with the queue and KV gauges current.
  std::string metrics_text(const SessionStats& stats) const;

 private:
  MetricsRegistry registry_;
  SessionMetrics metrics_;
  std::unique_ptr<FingerprintRecorder> recorder_;  // null when fingerprints are off
  RunFingerprint base_;
};

// Creates the observer and attaches it to the session's engine (before any request).
std::shared_ptr<SessionObserver> attach_observer(DeterministicSession& session, RecordLevel level);

}  // namespace detinfer::capi
