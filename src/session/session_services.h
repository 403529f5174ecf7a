// What a session composes around its engine (issues 7 and 8): the KV-prefix cache
// (PrefixProvider), the result cache (ResultShortcut), the metrics registry, the
// fingerprint recorder and the consistency monitor (EngineObserver), and the replay of
// recorded requests. docs/session.md, "Caches, fingerprints and metrics".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/result_cache.h"
#include "detinfer/consistency_monitor.h"
#include "detinfer/fingerprint.h"
#include "detinfer/fingerprint_recorder.h"
#include "detinfer/metrics.h"
#include "detinfer/replay_report.h"
#include "session/session_impl.h"

namespace detinfer {

class SessionServices final : public EngineObserver,
                              public PrefixProvider,
                              public ResultShortcut,
                              public std::enable_shared_from_this<SessionServices> {
 public:
  // Builds the caches, recorder and monitor the options ask for and attaches them to
  // session.engine (before the first request). Throws Error(kInvalidArgument) naming the
  // option, Error(kUnavailable) when a recorder file or cache directory cannot be opened.
  static std::shared_ptr<SessionServices> attach(DeterministicSession::Impl& session);
  ~SessionServices() override;

  // EngineObserver (engine thread).
  void on_step(const StepStats& s) override;
  bool wants_logits() const override { return recorder_.wants_logits(); }
  void on_logits(const EngineRequest& r, std::int32_t sample_index, std::int32_t step,
                 const float* row, std::int64_t vocab) override;
  void on_finished(const EngineRequest& r, GenerationResult& result) override;
  void on_failed(const EngineRequest& r, const Error& e) override;

  // PrefixProvider (engine thread).
  std::int64_t restore(const EngineRequest& r, KvCachePool& pool,
                       std::vector<std::int32_t>& table) override;
  void publish(const EngineRequest& r, const KvCachePool& pool,
               const std::vector<std::int32_t>& table) override;

  // ResultShortcut (caller's thread): a result-cache hit, recorded and streamed.
  std::optional<GenerationResult> lookup(const EngineRequest& r) override;

  // Runs a request the caller does not see (replay, shadow replay): no cache, no
  // metrics, no recorder. Returns the result and its fingerprint (level steps).
  RunFingerprint run_silent(const std::vector<std::int32_t>& prompt, GenerationConfig config);
  ReplayReport replay(const RunFingerprint& original);

  // Drops what lookup() kept for a request the engine then refused.
  void forget(std::uint64_t id);

  // Stops the monitor (before the engine goes away).
  void stop_monitor();

  MetricsRegistry& registry() { return registry_; }
  std::string metrics_text();
  CacheStats cache_stats() const;
  void invalidate_caches();
  ConsistencyStats consistency_stats() const;
  ConsistencyMonitor* monitor() { return monitor_.get(); }

 private:
  explicit SessionServices(DeterministicSession::Impl& session);
  bool silent(std::uint64_t id);
  Hash128 result_key(const EngineRequest& r) const;
  // Metrics, fingerprint and monitor of a result handed to the caller.
  void complete(const EngineRequest& r, GenerationResult& result,
                std::vector<std::vector<std::vector<float>>> logits);
  void sync_cache_metrics();

  DeterministicSession::Impl& session_;
  MetricsRegistry registry_;
  SessionMetrics metrics_;
  RunFingerprint base_;  // host, numerics, model and tokenizer groups
  std::shared_ptr<PrefixCache> prefix_;
  std::string prefix_salt_;  // cache_salt, plus the GPU model for non-canonical CUDA KV
  std::once_flag prefix_opened_;
  std::unique_ptr<ResultCache> results_;
  FingerprintRecorder recorder_;
  std::unique_ptr<ConsistencyMonitor> monitor_;

  std::mutex mu_;  // guards the maps below and the cache-metrics snapshot
  std::set<std::uint64_t> silent_ids_;
  std::map<std::uint64_t, GenerationResult> audits_;  // id -> cached result to compare
  // id -> sample -> step -> logits row (RecordLevel::kLogits, non-beam requests)
  std::map<std::uint64_t, std::vector<std::vector<std::vector<float>>>> logits_;
  CacheStats last_cache_stats_;
};

}  // namespace detinfer
