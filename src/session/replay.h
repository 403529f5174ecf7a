// Replays of recorded requests (DeterministicSession::replay) and the consistency
// monitor's shadow replays: a client of the request pipeline like any caller, whose
// requests carry the policy use_caches = false, observed = false, so they recompute
// everything and are not counted, recorded or checked again. docs/fingerprint.md.
#pragma once

#include <vector>

#include "detinfer/fingerprint.h"
#include "detinfer/metrics.h"
#include "detinfer/replay_report.h"
#include "engine/engine.h"
#include "session/request_prep.h"

namespace detinfer::session {

class Replayer {
 public:
  // All four must outlive the replayer. `base` holds the session's host, numerics, model
  // and tokenizer groups; `metrics` gets replay_match / replay_mismatch of replay().
  Replayer(RequestPrep& prep, engine::Engine& engine, const RunFingerprint& base,
           const SessionMetrics& metrics);

  // Runs the request (caches bypassed, unobserved) and returns its untrimmed fingerprint
  // (level steps). Throws what preparation or the engine throws.
  RunFingerprint run(const std::vector<std::int32_t>& prompt, const GenerationConfig& config);
  // run() on the fingerprint's request (its config with its seed).
  RunFingerprint rerun(const RunFingerprint& original);
  // Compares a rerun with `original`; refuses when model, tokenizer or prompt ids do not
  // allow a rerun, or the request is invalid here.
  ReplayReport replay(const RunFingerprint& original);

 private:
  RequestPrep& prep_;
  engine::Engine& engine_;
  const RunFingerprint& base_;
  const SessionMetrics& metrics_;
};

}  // namespace detinfer::session
