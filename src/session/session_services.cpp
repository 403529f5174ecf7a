#include "session/session_services.h"

#include <utility>

#include "cache/prefix_pool.h"
#include "cache/result_codec.h"
#include "core/check.h"
#include "core/log.h"
#include "detinfer/version.h"
#include "kernels/kernels.h"
#include "model/model_config.h"
#include "session/distribution_stats.h"

namespace detinfer {

namespace {
bool has_cancelled(const GenerationResult& r) {
  for (const Sequence& s : r.sequences) {
    if (s.finish_reason == FinishReason::kCancelled) return true;
  }
  return false;
}

// Hands a cached result to the caller's callback as the engine hands a finished beam
// search: every token once, the whole text with the first.
void stream_cached(const EngineRequest& r, const GenerationResult& result) {
  if (!r.on_token) return;
  for (std::size_t i = 0; i < result.sequences.size(); ++i) {
    const Sequence& s = result.sequences[i];
    for (std::size_t t = 0; t < s.tokens.size(); ++t) {
      TokenEvent ev;
      ev.token = s.tokens[t];
      if (t == 0) ev.text = s.text;
      ev.logprobs = t < s.logprobs.size() ? &s.logprobs[t] : nullptr;
      ev.sample_index = static_cast<std::int32_t>(i);
      ev.step = static_cast<std::int32_t>(t);
      if (!r.on_token(ev)) return;  // the result is complete already; stop streaming
    }
  }
}

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

SessionServices::SessionServices(DeterministicSession::Impl& session)
    : session_(session), metrics_(registry_), recorder_(session.options.recorder) {}

SessionServices::~SessionServices() { stop_monitor(); }

std::shared_ptr<SessionServices> SessionServices::attach(DeterministicSession::Impl& session) {
  std::shared_ptr<SessionServices> s(new SessionServices(session));
  const SessionOptions& o = session.options;
  const Model& model = *session.model;
  set_host_groups(s->base_);
  const DeviceInfo dev = model.device_info();
  const bool cuda = dev.device != "cpu";
  s->base_.numerics.mode = to_string(model.mode());
  s->base_.numerics.spec_version = kNumericsSpecVersion;
  s->base_.numerics.kernel_isa = cuda ? "cuda"
                                 : model.mode() == NumericsMode::kCanonical
                                     ? kernels::to_string(kernels::active_isa())
                                     : "torch";
  s->base_.numerics.threads = o.threads;
  s->base_.numerics.device = dev.device;
  s->base_.numerics.kv_dtype = to_string(o.kv_dtype);
  if (cuda) s->base_.device.gpu = FingerprintGpu{dev.name, dev.compute_capability, dev.driver};
  // Canonical KV has the same bits on every device: one key namespace for CPU and GPU.
  // Other modes' KV depends on the GPU model too, so it is keyed apart by it.
  s->prefix_salt_ = o.cache_salt;
  if (cuda && model.mode() != NumericsMode::kCanonical) {
    s->prefix_salt_ += "\x1f" + std::string(to_string(model.mode())) + "@" + dev.name + " sm_" +
                       dev.compute_capability;
  }
  // Rounded KV is other numbers: never shared with another kv_dtype's (f32 keys unchanged).
  if (o.kv_dtype != KvDType::kF32)
    s->prefix_salt_ += "\x1fkv_dtype=" + std::string(to_string(o.kv_dtype));
  s->base_.model.fingerprint = model.fingerprint();
  s->base_.model.architecture = to_string(model.config().architecture);
  s->base_.model.weight_dtype = kernels::to_string(model.config().weight_dtype);
  if (session.tokenizer) s->base_.tokenizer_hash = session.tokenizer_hash;

  if (o.cache.prefix.enabled) {
    s->prefix_ = std::make_shared<PrefixCache>(o.cache.prefix, o.cache.redis);
    if (s->prefix_->enabled()) session.engine->set_prefix_provider(s);
  }
  if (o.cache.result.enabled) {
    s->results_ = std::make_unique<ResultCache>(o.cache.result, o.cache.redis);
    s->results_->open_model(model.fingerprint());
    if (model.mode() == NumericsMode::kCanonical) session.result_shortcut = s;
  }
  if (o.consistency.enabled) {
    std::weak_ptr<SessionServices> weak = s;
    s->monitor_ = std::make_unique<ConsistencyMonitor>(
        o.consistency.monitor,
        [weak](const RunFingerprint& fp) {
          auto self = weak.lock();
          if (!self) fail(ErrorCode::kUnavailable, "the session is closed");
          RunFingerprint replayed = self->run_silent(*fp.request.prompt_tokens, [&] {
            GenerationConfig c = fp.request.config;
            c.seed = fp.request.seed;
            return c;
          }());
          return replayed;
        },
        o.consistency.alarm, &s->metrics_);
  }
  session.engine->add_observer(s);
  if (o.distribution_interval > 0) {
    session.engine->add_observer(std::make_shared<DistributionStats>(
        s->registry_, o.distribution_interval, o.distribution_window));
  }
  return s;
}

void SessionServices::stop_monitor() { monitor_.reset(); }

void SessionServices::forget(std::uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  audits_.erase(id);
}

bool SessionServices::silent(std::uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  return silent_ids_.count(id) != 0;
}

// --- EngineObserver ---------------------------------------------------------------------

void SessionServices::on_step(const StepStats& s) {
  metrics_.queue_depth.set(static_cast<double>(s.queue_depth));
  metrics_.kv_blocks_in_use.set(static_cast<double>(s.kv_blocks_in_use));
  metrics_.kv_blocks_capacity.set(static_cast<double>(s.kv_blocks_capacity));
  const std::int32_t batch = s.decode_sequences + s.prefill_sequences;
  if (batch > 0) metrics_.batch_size.observe(batch);
}

void SessionServices::on_logits(const EngineRequest& r, std::int32_t sample_index,
                                std::int32_t step, const float* row, std::int64_t vocab) {
  // Beam search reports live beams, not returned sequences: no logits rows for it.
  if (r.config.num_beams > 1) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (silent_ids_.count(r.id) != 0) return;
  auto& samples = logits_[r.id];
  if (samples.size() <= static_cast<std::size_t>(sample_index)) samples.resize(sample_index + 1);
  auto& steps = samples[sample_index];
  if (steps.size() <= static_cast<std::size_t>(step)) steps.resize(step + 1);
  steps[step].assign(row, row + vocab);
}

void SessionServices::on_finished(const EngineRequest& r, GenerationResult& result) {
  std::vector<std::vector<std::vector<float>>> logits;
  std::optional<GenerationResult> audited;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (silent_ids_.count(r.id) != 0) return;  // run_silent erases the id itself
    auto l = logits_.find(r.id);
    if (l != logits_.end()) {
      logits = std::move(l->second);
      logits_.erase(l);
    }
    auto a = audits_.find(r.id);
    if (a != audits_.end()) {
      audited = std::move(a->second);
      audits_.erase(a);
    }
  }
  if (results_ && session_.model->mode() == NumericsMode::kCanonical) {
    try {
      const Hash128 key = result_key(r);
      if (audited) {
        results_->audit(key, *audited, result);  // on a mismatch the recomputed one is stored
      } else if (!has_cancelled(result)) {
        results_->put(key, result);
      }
    } catch (const Error& e) {
      logger().warn("result cache: request {} not stored: {}", r.id, e.what());
    }
  }
  complete(r, result, std::move(logits));
}

void SessionServices::on_failed(const EngineRequest& r, const Error&) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    logits_.erase(r.id);
    audits_.erase(r.id);
    if (silent_ids_.count(r.id) != 0) return;
  }
  metrics_.requests_failed.inc();
}

void SessionServices::complete(const EngineRequest& r, GenerationResult& result,
                               std::vector<std::vector<std::vector<float>>> logits) {
  metrics_.on_finished(result);
  if (recorder_.enabled() || monitor_) {
    // Untrimmed (prompt ids kept) for the monitor; the recorder trims to its options.
    RunFingerprint fp = fingerprint_of(base_, r.config, result, true);
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
    if (monitor_ && !has_cancelled(result)) monitor_->submit(fp);
  }
  sync_cache_metrics();
}

// --- PrefixProvider -----------------------------------------------------------------------

std::int64_t SessionServices::restore(const EngineRequest& r, KvCachePool& pool,
                                      std::vector<std::int32_t>& table) {
  std::call_once(prefix_opened_, [&] {
    PrefixNamespace ns;
    ns.model_fingerprint = session_.model->fingerprint();
    ns.mode = session_.model->mode();
    ns.spec_version = kNumericsSpecVersion;
    ns.block_size = pool.block_size();
    ns.block_bytes = pool.block_bytes();
    prefix_->open(ns);
  });
  // Replays recompute everything: they check the output, cache included.
  if (silent(r.id)) return 0;
  return restore_prefix_blocks(*prefix_, r.prompt, prefix_salt_, pool, table);
}

void SessionServices::publish(const EngineRequest& r, const KvCachePool& pool,
                              const std::vector<std::int32_t>& table) {
  // restore() always runs first for a request and opens the namespace.
  publish_prefix_blocks(*prefix_, r.prompt, prefix_salt_, pool, table);
}

void SessionServices::publish_sequence(const EngineRequest& /*r*/,
                                       const std::vector<std::int32_t>& tokens,
                                       const KvCachePool& pool,
                                       const std::vector<std::int32_t>& table) {
  publish_prefix_blocks(*prefix_, tokens, prefix_salt_, pool, table);
}

// --- ResultShortcut -----------------------------------------------------------------------

Hash128 SessionServices::result_key(const EngineRequest& r) const {
  // A non-default kv_dtype is other numerics: keyed apart (f32 keys unchanged).
  const KvDType kv = session_.options.kv_dtype;
  const Hash128 model_key = kv == KvDType::kF32 ? session_.model->fingerprint()
                                                : Hasher()
                                                      .update_hash(session_.model->fingerprint())
                                                      .update_field("kv_dtype")
                                                      .update_field(to_string(kv))
                                                      .digest128();
  return result_cache_key(model_key, session_.model->mode(), kNumericsSpecVersion,
                          base_.tokenizer_hash, r.prompt, canonical_generation_config(r.config));
}

std::optional<GenerationResult> SessionServices::lookup(const EngineRequest& r) {
  if (!results_ || silent(r.id)) return std::nullopt;
  std::optional<GenerationResult> hit;
  Hash128 key;
  try {
    key = result_key(r);
    hit = results_->get(key);
  } catch (const Error& e) {
    logger().warn("result cache: lookup of request {} skipped: {}", r.id, e.what());
    return std::nullopt;
  }
  if (!hit) return std::nullopt;
  if (results_->should_audit(key)) {
    // Run it as a miss; on_finished compares and serves the recomputation.
    std::lock_guard<std::mutex> lk(mu_);
    audits_.emplace(r.id, std::move(*hit));
    return std::nullopt;
  }
  hit->prompt_tokens = r.prompt;
  hit->seed = r.seed;
  hit->cache.prefix_cached_tokens = 0;
  hit->cache.result_cache_hit = true;
  stream_cached(r, *hit);
  complete(r, *hit, {});
  return hit;
}

// --- replay -------------------------------------------------------------------------------

RunFingerprint SessionServices::run_silent(const std::vector<std::int32_t>& prompt,
                                           GenerationConfig config) {
  EngineRequest r = session_.prepare(Prompt(prompt), config, {});
  const std::uint64_t id = r.id;
  const GenerationConfig normalized = r.config;
  {
    std::lock_guard<std::mutex> lk(mu_);
    silent_ids_.insert(id);
  }
  struct Forget {
    SessionServices* s;
    std::uint64_t id;
    ~Forget() {
      std::lock_guard<std::mutex> lk(s->mu_);
      s->silent_ids_.erase(id);
    }
  } forget{this, id};
  GenerationResult result = session_.engine->submit(std::move(r)).get();
  return fingerprint_of(base_, normalized, result, true);
}

ReplayReport SessionServices::replay(const RunFingerprint& original) {
  ReplayReport rep;
  if (original.model.fingerprint != base_.model.fingerprint) {
    rep.reason = "model differs: the fingerprint was recorded with model " +
                 original.model.fingerprint.hex() + ", this session has " +
                 base_.model.fingerprint.hex();
    return rep;
  }
  if (original.tokenizer_hash != base_.tokenizer_hash) {
    rep.reason = "tokenizer differs: the fingerprint was recorded with tokenizer " +
                 original.tokenizer_hash.hex() + ", this session has " + base_.tokenizer_hash.hex();
    return rep;
  }
  if (!original.request.prompt_tokens) {
    rep.reason =
        "the fingerprint records only the prompt's hash and length (store_prompt_tokens = "
        "false): the request cannot be re-run";
    return rep;
  }
  GenerationConfig config = original.request.config;
  config.seed = original.request.seed;
  RunFingerprint replayed;
  try {
    replayed = run_silent(*original.request.prompt_tokens, config);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    rep.reason = std::string("the recorded request is invalid for this session: ") + e.what();
    return rep;
  }
  rep.diff = diff(original, replayed);
  if (!rep.diff.reproduced()) {
    rep.verdict = ReplayVerdict::kDiverged;
    if (rep.diff.divergence) {
      const StepDivergence& d = *rep.diff.divergence;
      rep.reason = "first divergence: sequence " + std::to_string(d.sequence) + ", step " +
                   std::to_string(d.step) + " (" + d.reason + ")";
    } else {
      rep.reason = rep.diff.output_note.empty() ? "outputs differ" : rep.diff.output_note;
    }
  } else if (original.numerics.mode != replayed.numerics.mode) {
    rep.verdict = ReplayVerdict::kDiverged;
    rep.reason = "numerics mode differs (" + original.numerics.mode + " vs " +
                 replayed.numerics.mode +
                 "): the outputs agree, but only a replay in the "
                 "recorded mode proves reproduction";
  } else {
    rep.verdict = ReplayVerdict::kReproduced;
  }
  (rep.reproduced() ? metrics_.replay_match : metrics_.replay_mismatch).inc();
  rep.replayed = std::move(replayed);
  return rep;
}

// --- stats --------------------------------------------------------------------------------

void SessionServices::sync_cache_metrics() {
  const CacheOptions& o = session_.options.cache;
  std::lock_guard<std::mutex> lk(mu_);  // snapshot and delta under one lock: no double counts
  const CacheStats now = cache_stats();
  export_totals(metrics_.prefix_cache, prefix_totals(now.prefix, o.prefix),
                prefix_totals(last_cache_stats_.prefix, o.prefix));
  export_totals(metrics_.result_cache, result_totals(now.result, o.result),
                result_totals(last_cache_stats_.result, o.result));
  last_cache_stats_ = now;
}

std::string SessionServices::metrics_text() {
  sync_cache_metrics();
  return registry_.render();
}

CacheStats SessionServices::cache_stats() const {
  CacheStats s;
  if (prefix_) s.prefix = prefix_->stats();
  if (results_) s.result = results_->stats();
  return s;
}

void SessionServices::invalidate_caches() {
  if (prefix_) prefix_->invalidate_all();
  if (results_) results_->invalidate_all();
}

ConsistencyStats SessionServices::consistency_stats() const {
  return monitor_ ? monitor_->stats() : ConsistencyStats{};
}

}  // namespace detinfer
