// The detinfer_* metric families (docs/metrics.md).
#include "detinfer/generation.h"
#include "detinfer/metrics.h"

namespace detinfer {

namespace {
CacheMetrics cache_metrics(MetricsRegistry& r, const std::string& tier) {
  const MetricLabels l = {{"cache", tier}};
  CacheMetrics m;
  m.hits = r.counter("detinfer_cache_hits_total", "Cache lookups that found an entry.", l);
  m.misses = r.counter("detinfer_cache_misses_total", "Cache lookups that found no entry.", l);
  m.evictions = r.counter("detinfer_cache_evictions_total", "Entries evicted from a cache.", l);
  m.corrupt = r.counter("detinfer_cache_corrupt_total",
                        "Cache entries that failed validation and were dropped.", l);
  m.backend_errors = r.counter("detinfer_cache_backend_errors_total",
                               "Failed reads or writes of a cache's backing store.", l);
  m.bytes = r.gauge("detinfer_cache_bytes", "Bytes currently held by a cache.", l);
  return m;
}
}  // namespace

std::vector<double> SessionMetrics::latency_buckets_seconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> SessionMetrics::batch_size_buckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256};
}

SessionMetrics::SessionMetrics(MetricsRegistry& r) {
  const char* requests_help = "Finished requests by finish reason.";
  const auto by_reason = [&](FinishReason reason) {
    return r.counter("detinfer_requests_total", requests_help,
                     {{"finish_reason", to_string(reason)}});
  };
  requests_length = by_reason(FinishReason::kLength);
  requests_stop = by_reason(FinishReason::kStop);
  requests_cancelled = by_reason(FinishReason::kCancelled);
  requests_failed =
      r.counter("detinfer_requests_failed_total", "Requests that ended with an error.");
  prompt_tokens = r.counter("detinfer_prompt_tokens_total", "Prompt tokens of admitted requests.");
  generated_tokens = r.counter("detinfer_generated_tokens_total", "Tokens generated.");
  prefix_cached_tokens = r.counter("detinfer_prefix_cached_tokens_total",
                                   "Prompt tokens served from the KV-prefix cache.");
  time_to_first_token =
      r.histogram("detinfer_time_to_first_token_seconds",
                  "Time from submission to the first generated token.", latency_buckets_seconds());
  inter_token_latency = r.histogram("detinfer_inter_token_latency_seconds",
                                    "Time between consecutive generated tokens of a sequence.",
                                    latency_buckets_seconds());
  batch_size =
      r.histogram("detinfer_batch_size", "Sequences per forward step.", batch_size_buckets());
  queue_depth = r.gauge("detinfer_queue_depth", "Requests waiting for admission.");
  kv_blocks_in_use = r.gauge("detinfer_kv_blocks_in_use", "KV-cache blocks in use.");
  kv_blocks_capacity = r.gauge("detinfer_kv_blocks_capacity", "KV-cache blocks in the pool.");
  prefix_cache = cache_metrics(r, "prefix");
  result_cache = cache_metrics(r, "result");
  const char* replay_help = "Replay checks of finished requests by result.";
  replay_match = r.counter("detinfer_replay_checks_total", replay_help, {{"result", "match"}});
  replay_mismatch =
      r.counter("detinfer_replay_checks_total", replay_help, {{"result", "mismatch"}});
  consistency_ratio = r.gauge("detinfer_consistency_ratio",
                              "Fraction of replay checks whose digests matched (1 before any).");
  consistency_ratio.set(1.0);
  const char* drafted_help = "Tokens proposed by a speculative decoding drafter.";
  const char* accepted_help =
      "Drafted tokens equal to the token the model chose (decoded without a pass of their "
      "own).";
  const char* ratio_help = "Accepted / drafted tokens of a speculative decoding drafter so far.";
  ngram_draft_tokens =
      r.counter("detinfer_speculative_draft_tokens_total", drafted_help, {{"drafter", "ngram"}});
  model_draft_tokens =
      r.counter("detinfer_speculative_draft_tokens_total", drafted_help, {{"drafter", "model"}});
  ngram_accepted_tokens = r.counter("detinfer_speculative_accepted_tokens_total", accepted_help,
                                    {{"drafter", "ngram"}});
  model_accepted_tokens = r.counter("detinfer_speculative_accepted_tokens_total", accepted_help,
                                    {{"drafter", "model"}});
  ngram_acceptance_ratio =
      r.gauge("detinfer_speculative_acceptance_ratio", ratio_help, {{"drafter", "ngram"}});
  model_acceptance_ratio =
      r.gauge("detinfer_speculative_acceptance_ratio", ratio_help, {{"drafter", "model"}});
  preemptions = r.counter("detinfer_preemptions_total",
                          "Requests preempted because the KV pool ran out during decode.");
  resumptions = r.counter("detinfer_resumptions_total",
                          "Preempted requests admitted again (resumed by recomputing their "
                          "tokens).");
}

const Counter& SessionMetrics::requests(FinishReason reason) const {
  switch (reason) {
    case FinishReason::kStop:
      return requests_stop;
    case FinishReason::kCancelled:
      return requests_cancelled;
    case FinishReason::kLength:
      break;
  }
  return requests_length;
}

void SessionMetrics::on_finished(const GenerationResult& result) const {
  requests(result.sequences.empty() ? FinishReason::kLength
                                    : result.sequences.front().finish_reason)
      .inc();
  prompt_tokens.inc(result.prompt_tokens.size());
  std::uint64_t generated = 0;
  for (const auto& s : result.sequences) generated += s.tokens.size();
  generated_tokens.inc(generated);
  if (result.cache.prefix_cached_tokens > 0) {
    prefix_cached_tokens.inc(static_cast<std::uint64_t>(result.cache.prefix_cached_tokens));
  }
  const Timings& t = result.timings;
  if (!t.token_ms.empty()) time_to_first_token.observe(t.time_to_first_token_ms / 1000.0);
  for (std::size_t i = 1; i < t.token_ms.size(); ++i)
    inter_token_latency.observe(t.token_ms[i] / 1000.0);
}

}  // namespace detinfer
