// A small metrics registry (counters, gauges, fixed-bucket histograms, optional labels)
// rendered in the Prometheus text exposition format 0.0.4, and SessionMetrics: the
// detinfer_* families a session owns (docs/metrics.md).
//
// Registration takes a lock; updating a handle never does (atomics only), so the engine
// can update metrics on its hot path. A default-constructed handle is a no-op, which is
// how a session runs with metrics off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detinfer/export.h"
#include "detinfer/generation.h"

namespace detinfer {

// Label name/value pairs of one time series, e.g. {{"finish_reason", "stop"}}.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

namespace metrics {
struct CounterCell;
struct GaugeCell;
struct HistogramCell;
}  // namespace metrics

// A monotonically increasing integer count (Prometheus "counter").
class DETINFER_API Counter {
 public:
  Counter() = default;
  void inc(std::uint64_t n = 1) const;
  std::uint64_t value() const;  // 0 for a no-op handle

 private:
  friend class MetricsRegistry;
  explicit Counter(metrics::CounterCell* cell) : cell_(cell) {}
  metrics::CounterCell* cell_ = nullptr;
};

// A value that goes up and down (Prometheus "gauge").
class DETINFER_API Gauge {
 public:
  Gauge() = default;
  void set(double v) const;
  void add(double delta) const;
  void inc() const { add(1.0); }
  void dec() const { add(-1.0); }
  double value() const;  // 0 for a no-op handle

 private:
  friend class MetricsRegistry;
  explicit Gauge(metrics::GaugeCell* cell) : cell_(cell) {}
  metrics::GaugeCell* cell_ = nullptr;
};

// Observations counted into fixed buckets (Prometheus "histogram"). Bucket upper bounds
// are inclusive (v <= le), as Prometheus defines them.
class DETINFER_API Histogram {
 public:
  Histogram() = default;
  void observe(double v) const;
  std::uint64_t count() const;
  double sum() const;
  // Non-cumulative count of each finite bucket, then the overflow (+Inf) bucket.
  std::vector<std::uint64_t> bucket_counts() const;

 private:
  friend class MetricsRegistry;
  explicit Histogram(metrics::HistogramCell* cell) : cell_(cell) {}
  metrics::HistogramCell* cell_ = nullptr;
};

// Owns every metric; handles stay valid as long as the registry lives. Thread-safe.
class DETINFER_API MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registers (or finds) the series `name{labels}`. Every series of a family must have
  // the same type, help text, label names (in the same order) and buckets. Throws
  // Error(kInvalidArgument) naming the metric for an invalid name or label name
  // ([a-zA-Z_:][a-zA-Z0-9_:]*, labels [a-zA-Z_][a-zA-Z0-9_]* not starting "__"), a
  // conflicting re-registration, or buckets that are not finite and strictly increasing.
  Counter counter(const std::string& name, const std::string& help,
                  const MetricLabels& labels = {});
  Gauge gauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram histogram(const std::string& name, const std::string& help,
                      const std::vector<double>& buckets, const MetricLabels& labels = {});

  // The text exposition format 0.0.4: families sorted by name, each with # HELP and
  // # TYPE lines, series in registration order; histograms as cumulative _bucket series
  // ending in le="+Inf", then _sum and _count.
  std::string render() const;

  // The Content-Type an HTTP endpoint serving render() should send.
  static const char* content_type();

 private:
  struct DETINFER_LOCAL Impl;
  std::unique_ptr<Impl> impl_;
};

// Deprecated (CacheMetrics, SessionMetrics): the session registers and updates these
// families in its registry (DeterministicSession::metrics()). The pragmas keep the
// declarations' use of each other from warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
// Counters and gauges of one cache tier (label cache="prefix" or "result").
struct DETINFER_API DETINFER_DEPRECATED_MACHINERY CacheMetrics {
  Counter hits;
  Counter misses;
  Counter evictions;
  Counter corrupt;         // entries that failed validation and were dropped
  Counter backend_errors;  // failed reads/writes of the backing store (disk, Redis)
  Gauge bytes;             // bytes currently held
};

// Handles to the detinfer_* families a session updates (names in docs/metrics.md).
// Registering twice in one registry returns handles to the same series.
struct DETINFER_API DETINFER_DEPRECATED_MACHINERY SessionMetrics {
  explicit SessionMetrics(MetricsRegistry& registry);
  // A no-op set (every handle does nothing): metrics off.
  SessionMetrics() = default;

  Counter requests_length;        // detinfer_requests_total{finish_reason="length"}
  Counter requests_stop;          // ...{finish_reason="stop"}
  Counter requests_cancelled;     // ...{finish_reason="cancelled"}
  Counter requests_failed;        // detinfer_requests_failed_total (threw an Error)
  Counter prompt_tokens;          // detinfer_prompt_tokens_total
  Counter generated_tokens;       // detinfer_generated_tokens_total
  Counter prefix_cached_tokens;   // detinfer_prefix_cached_tokens_total
  Histogram time_to_first_token;  // detinfer_time_to_first_token_seconds
  Histogram inter_token_latency;  // detinfer_inter_token_latency_seconds
  Histogram batch_size;           // detinfer_batch_size (sequences per forward step)
  Gauge queue_depth;              // detinfer_queue_depth
  Gauge kv_blocks_in_use;         // detinfer_kv_blocks_in_use
  Gauge kv_blocks_capacity;       // detinfer_kv_blocks_capacity
  CacheMetrics prefix_cache;      // detinfer_cache_*{cache="prefix"}
  CacheMetrics result_cache;      // detinfer_cache_*{cache="result"}
  Counter replay_match;           // detinfer_replay_checks_total{result="match"}
  Counter replay_mismatch;        // ...{result="mismatch"}
  Gauge consistency_ratio;        // detinfer_consistency_ratio (1 until a check runs)
  // Speculative decoding, per drafter (label drafter="ngram" or "model"):
  // detinfer_speculative_draft_tokens_total, detinfer_speculative_accepted_tokens_total and
  // detinfer_speculative_acceptance_ratio (accepted / drafted so far; 0 before any draft).
  Counter ngram_draft_tokens;
  Counter ngram_accepted_tokens;
  Gauge ngram_acceptance_ratio;
  Counter model_draft_tokens;
  Counter model_accepted_tokens;
  Gauge model_acceptance_ratio;
  Counter preemptions;  // detinfer_preemptions_total
  Counter resumptions;  // detinfer_resumptions_total

  // The requests_* counter of a finish reason.
  const Counter& requests(FinishReason reason) const;

  // Per-request updates from a finished result: requests_total{finish_reason of sequence
  // 0}, prompt_tokens, generated_tokens (all sequences), prefix_cached_tokens,
  // time_to_first_token and inter_token_latency (timings.token_ms[1..]), in seconds.
  void on_finished(const GenerationResult& result) const;

  // Bucket bounds used for the histograms above.
  static std::vector<double> latency_buckets_seconds();
  static std::vector<double> batch_size_buckets();
};
#pragma GCC diagnostic pop

}  // namespace detinfer
