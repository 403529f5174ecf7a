// The telemetry stage of a session's request pipeline, an engine observer: metrics, the
// fingerprint recorder and the hand-off of finished requests to the consistency monitor.
// It only watches; nothing it does feeds back into a request's output. Requests whose
// policy says observed = false (replays) are not counted, recorded or checked.
// docs/architecture.md, "A session's request pipeline".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "detinfer/consistency_monitor.h"
#include "detinfer/fingerprint.h"
#include "detinfer/fingerprint_recorder.h"
#include "detinfer/metrics.h"
#include "detinfer/session.h"
#include "engine/engine.h"
#include "model/model.h"
#include "session/cache_bridge.h"
#include "session/numerics_identity.h"

namespace detinfer::session {

// The groups of a session's fingerprints that do not depend on the request: host,
// numerics (from `numerics`), model and tokenizer (`tokenizer_hash` zero without a
// tokenizer).
RunFingerprint session_base_fingerprint(const SessionOptions& options, const model::Model& model,
                                        const NumericsIdentity& numerics,
                                        const Hash128& tokenizer_hash);

class Telemetry final : public engine::EngineObserver {
 public:
  // Opens the recorder (Error(kUnavailable) naming its file). `caches` may be null.
  Telemetry(const SessionOptions& options, RunFingerprint base,
            std::shared_ptr<const CacheBridge> caches);

  // Finished requests go to `monitor` (may be null) from now on; before the first
  // request. The monitor must outlive every later on_finished/served call.
  void set_monitor(ConsistencyMonitor* monitor) { monitor_ = monitor; }

  // EngineObserver (engine thread).
  void on_step(const engine::StepStats& s) override;
  void on_gauges(const engine::StepStats& s) override;
  void on_drafts(engine::Drafter drafter, const engine::DraftTally& t) override;
  void on_preempted(const engine::EngineRequest&) override { metrics_.preemptions.inc(1); }
  void on_resumed(const engine::EngineRequest&) override { metrics_.resumptions.inc(1); }
  void on_abandoned(const engine::EngineRequest& r) override;
  bool wants_logits() const override { return recorder_.wants_logits(); }
  void on_logits(const engine::EngineRequest& r, std::int32_t sample_index, std::int32_t step,
                 const float* row, std::int64_t vocab) override;
  void on_finished(const engine::EngineRequest& r, GenerationResult& result) override;
  void on_failed(const engine::EngineRequest& r, const Error& e) override;

  // A result the cache stage served without the engine (caller's thread).
  void served(const engine::EngineRequest& r, GenerationResult& result);

  const RunFingerprint& base() const { return base_; }
  const SessionMetrics& session_metrics() const { return metrics_; }
  MetricsRegistry& registry() { return registry_; }
  // Prometheus text, cache statistics brought up to date first.
  std::string metrics_text();

 private:
  // Metrics, fingerprint and monitor of a result handed to the caller.
  void complete(const engine::EngineRequest& r, GenerationResult& result,
                std::vector<std::vector<std::vector<float>>> logits);
  void sync_cache_metrics();

  MetricsRegistry registry_;
  SessionMetrics metrics_;
  const RunFingerprint base_;
  const CacheOptions cache_options_;
  const std::shared_ptr<const CacheBridge> caches_;
  FingerprintRecorder recorder_;
  ConsistencyMonitor* monitor_ = nullptr;

  std::mutex mu_;  // guards logits_ and the cache-metrics snapshot
  // id -> sample -> step -> logits row (RecordLevel::kLogits, non-beam requests)
  std::map<std::uint64_t, std::vector<std::vector<std::vector<float>>>> logits_;
  CacheStats last_cache_stats_;
};

}  // namespace detinfer::session
