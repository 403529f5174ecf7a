// ConsistencyMonitor: shadow-replays a deterministic sample of finished requests on a
// low-priority background thread, compares their output digests with the original
// and keeps the consistency ratio current; when it drops below a threshold it logs a
// warning and calls the user's callback with both fingerprints (docs/fingerprint.md,
// "Consistency monitor").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "detinfer/export.h"
#include "detinfer/fingerprint.h"
#include "detinfer/metrics.h"

namespace detinfer {

struct DETINFER_API ConsistencyMonitorOptions {
  // Fraction of requests replayed, in [0, 1]. Sampling is a pure function of the
  // request key (RunFingerprint::request_key) and `sampling_salt`: the same request is
  // always sampled or never, in every process.
  double sample_rate = 0.01;
  std::uint64_t sampling_salt = 0;
  // Alarm when matches / checks < threshold (after at least min_checks checks).
  double threshold = 0.999;
  std::uint64_t min_checks = 1;
  // Sampled requests waiting for replay beyond this are dropped (counted), so a slow
  // replay never holds memory or back-pressures serving.
  std::size_t queue_capacity = 64;
  // Run the worker at idle priority (SCHED_IDLE, else nice 19).
  bool low_priority = true;
};

// Re-runs the request of `original` and returns the new fingerprint. Called on the
// monitor's thread. An Error thrown here counts as a replay error, not a mismatch.
using ReplayFunction = std::function<RunFingerprint(const RunFingerprint& original)>;
// Called on the monitor's thread for each mismatch while the ratio is below threshold.
using ConsistencyAlarm = std::function<void(const RunFingerprint& original,
                                            const RunFingerprint& replayed, double ratio)>;

struct DETINFER_API ConsistencyStats {
  std::uint64_t submitted = 0;  // sampled and queued
  std::uint64_t skipped = 0;    // not sampled
  std::uint64_t dropped = 0;    // sampled but the queue was full
  std::uint64_t checks = 0;     // replays compared
  std::uint64_t matches = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t errors = 0;  // replays that threw
  std::uint64_t alarms = 0;  // callback invocations
  double ratio = 1.0;        // matches / checks (1 before any check)
};

// Deprecated: the session runs it (SessionOptions::consistency, consistency_stats()).
// The pragmas keep this declaration's own use of SessionMetrics from warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
class DETINFER_API DETINFER_DEPRECATED_MACHINERY ConsistencyMonitor {
 public:
  // Throws Error(kInvalidArgument) for options out of range or an empty replay
  // function. `metrics` (optional) gets replay_match/replay_mismatch and
  // consistency_ratio; it must outlive the monitor.
  ConsistencyMonitor(ConsistencyMonitorOptions options, ReplayFunction replay,
                     ConsistencyAlarm alarm = {}, const SessionMetrics* metrics = nullptr);
  // Stops the worker after the replay in progress; pending requests are discarded.
  ~ConsistencyMonitor();
  ConsistencyMonitor(const ConsistencyMonitor&) = delete;
  ConsistencyMonitor& operator=(const ConsistencyMonitor&) = delete;

  // Whether a request is in the sample (deterministic; see sample_rate).
  bool sampled(const RunFingerprint& fp) const;
  // Queues `fp` when sampled and there is room; returns whether it was queued. Cheap:
  // never runs the replay on the caller's thread.
  bool submit(const RunFingerprint& fp);
  // Blocks until every queued request has been checked.
  void drain();
  ConsistencyStats stats() const;

 private:
  struct DETINFER_LOCAL Impl;
  std::unique_ptr<Impl> impl_;
};
#pragma GCC diagnostic pop

}  // namespace detinfer
