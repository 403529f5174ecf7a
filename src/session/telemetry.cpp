#include "session/telemetry.h"

#include <utility>

#include "core/log.h"
#include "detinfer/numerics.h"
#include "detinfer/transcript.h"
#include "detinfer/version.h"
#include "kernels/kernels.h"
#include "model/model_config.h"

namespace detinfer::session {

namespace {
// Adds the growth of a monotonic statistic to a counter.
void add_delta(const Counter& c, std::int64_t now, std::int64_t before) {
  if (now > before) c.inc(static_cast<std::uint64_t>(now - before));
}

struct CacheTotals {
  std::int64_t hits = 0, misses = 0, evictions = 0, corrupt = 0, errors = 0, bytes = 0;
  void add(const CacheTierStats& t) {
    hits += t.hits;
    evictions += t.evictions + t.expirations;
    corrupt += t.corrupt;
    errors += t.backend_errors;
    bytes += t.bytes;
  }
};

// A block or result is a hit in exactly one tier; a miss is a miss in the last tier
// asked (the slowest enabled one).
CacheTotals prefix_totals(const PrefixCacheStats& s, const PrefixCacheOptions& o) {
  CacheTotals t;
  t.add(s.memory);
  t.add(s.disk);
  t.add(s.redis);
  t.misses = o.redis.enabled             ? s.redis.misses
             : !o.disk.directory.empty() ? s.disk.misses
                                         : s.memory.misses;
  return t;
}
CacheTotals result_totals(const ResultCacheStats& s, const ResultCacheOptions& o) {
  CacheTotals t;
  t.add(s.memory);
  t.add(s.redis);
  t.misses = o.use_redis ? s.redis.misses : s.memory.misses;
  return t;
}

void export_totals(const CacheMetrics& m, const CacheTotals& now, const CacheTotals& before) {
  add_delta(m.hits, now.hits, before.hits);
  add_delta(m.misses, now.misses, before.misses);
  add_delta(m.evictions, now.evictions, before.evictions);
  add_delta(m.corrupt, now.corrupt, before.corrupt);
  add_delta(m.backend_errors, now.errors, before.errors);
  m.bytes.set(static_cast<double>(now.bytes));
}
}  // namespace

RunFingerprint session_base_fingerprint(const SessionOptions& o, const model::Model& model,
                                        const NumericsIdentity& numerics,
                                        const Hash128& tokenizer_hash) {
  RunFingerprint b;
  set_host_groups(b);
  const model::DeviceInfo dev = model.device_info();
  fill_fingerprint(numerics, dev.driver, b);
  // Recorded beside the identity: canonical bits do not depend on them.
  b.numerics.kernel_isa = numerics.device_class != "cpu" ? "cuda"
                          : numerics.mode == NumericsMode::kCanonical
                              ? kernels::to_string(kernels::active_isa())
                              : "torch";
  b.numerics.threads = o.threads;
  b.model.fingerprint = model.fingerprint();
  b.model.architecture = to_string(model.config().architecture);
  b.tokenizer_hash = tokenizer_hash;
  return b;
}

Telemetry::Telemetry(const SessionOptions& options, RunFingerprint base,
                     std::shared_ptr<const CacheBridge> caches)
    : metrics_(registry_),
      base_(std::move(base)),
      cache_options_(options.cache),
      caches_(std::move(caches)),
      recorder_(options.recorder) {}

void Telemetry::on_step(const engine::StepStats& s) {
  on_gauges(s);
  const std::int32_t batch = s.decode_sequences + s.prefill_sequences;
  if (batch > 0) metrics_.batch_size.observe(batch);
}

void Telemetry::on_drafts(engine::Drafter drafter, const engine::DraftTally& t) {
  const bool model = drafter == engine::Drafter::kModel;
  const Counter& drafted = model ? metrics_.model_draft_tokens : metrics_.ngram_draft_tokens;
  const Counter& accepted = model ? metrics_.model_accepted_tokens : metrics_.ngram_accepted_tokens;
  drafted.inc(static_cast<std::uint64_t>(t.drafted));
  accepted.inc(static_cast<std::uint64_t>(t.accepted));
  // Only the engine thread updates these, so the ratio of the two totals is consistent.
  const std::uint64_t all = drafted.value();
  (model ? metrics_.model_acceptance_ratio : metrics_.ngram_acceptance_ratio)
      .set(all == 0 ? 0.0 : static_cast<double>(accepted.value()) / static_cast<double>(all));
}

void Telemetry::on_gauges(const engine::StepStats& s) {
  metrics_.queue_depth.set(static_cast<double>(s.queue_depth));
  metrics_.kv_blocks_in_use.set(static_cast<double>(s.kv_blocks_in_use));
  metrics_.kv_blocks_capacity.set(static_cast<double>(s.kv_blocks_capacity));
}

void Telemetry::on_abandoned(const engine::EngineRequest& r) {
  // Cancelled before admission: counted with the cancelled requests, nothing else ran.
  if (r.observed) metrics_.requests_cancelled.inc();
}

void Telemetry::on_logits(const engine::EngineRequest& r, std::int32_t sample_index,
                          std::int32_t step, const float* row, std::int64_t vocab) {
  // Beam search reports live beams, not returned sequences: no logits rows for it.
  if (!r.observed || r.config.num_beams > 1) return;
  std::lock_guard<std::mutex> lk(mu_);
  auto& samples = logits_[r.id];
  if (samples.size() <= static_cast<std::size_t>(sample_index)) samples.resize(sample_index + 1);
  auto& steps = samples[sample_index];
  if (steps.size() <= static_cast<std::size_t>(step)) steps.resize(step + 1);
  steps[step].assign(row, row + vocab);
}

void Telemetry::on_finished(const engine::EngineRequest& r, GenerationResult& result) {
  if (!r.observed) return;
  std::vector<std::vector<std::vector<float>>> logits;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto l = logits_.find(r.id);
    if (l != logits_.end()) {
      logits = std::move(l->second);
      logits_.erase(l);
    }
  }
  complete(r, result, std::move(logits));
}

void Telemetry::on_failed(const engine::EngineRequest& r, const Error&) {
  if (!r.observed) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    logits_.erase(r.id);
  }
  metrics_.requests_failed.inc();
}

void Telemetry::served(const engine::EngineRequest& r, GenerationResult& result) {
  if (r.observed) complete(r, result, {});
}

void Telemetry::complete(const engine::EngineRequest& r, GenerationResult& result,
                         std::vector<std::vector<std::vector<float>>> logits) {
  metrics_.on_finished(result);
  // Untrimmed (prompt ids kept) for the transcript and the monitor; the recorder trims
  // to its options.
  RunFingerprint fp = fingerprint_of(base_, r.config, result, true);
  result.transcript_json = transcript_of(fp).to_json();
  if (recorder_.enabled() || monitor_ != nullptr) {
    for (std::size_t i = 0; i < fp.sequences.size() && i < logits.size(); ++i) {
      if (logits[i].size() == fp.sequences[i].tokens.size()) {
        fp.sequences[i].logits = std::move(logits[i]);
      }
    }
    if (recorder_.enabled()) {
      try {
        result.fingerprint_json = recorder_.record(fp);
      } catch (const Error& e) {
        // The result is still good; losing its record is the operator's problem to see.
        logger().error("fingerprint recorder: request {}: {}", r.id, e.what());
      }
    }
    if (monitor_ != nullptr && !has_cancelled(result)) monitor_->submit(fp);
  }
  sync_cache_metrics();
}

void Telemetry::sync_cache_metrics() {
  if (!caches_) return;
  std::lock_guard<std::mutex> lk(mu_);  // snapshot and delta under one lock: no double counts
  const CacheStats now = caches_->stats();
  export_totals(metrics_.prefix_cache, prefix_totals(now.prefix, cache_options_.prefix),
                prefix_totals(last_cache_stats_.prefix, cache_options_.prefix));
  export_totals(metrics_.result_cache, result_totals(now.result, cache_options_.result),
                result_totals(last_cache_stats_.result, cache_options_.result));
  last_cache_stats_ = now;
}

std::string Telemetry::metrics_text() {
  sync_cache_metrics();
  return registry_.render();
}

}  // namespace detinfer::session
