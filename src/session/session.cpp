#include "detinfer/session.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "core/memory_limits.h"
#include "kernels/kernels.h"
#include "model/model_config.h"
#include "model/quant_scheme.h"
#include "session/chat_transcript.h"
#include "session/distribution_stats.h"
#include "session/model_metadata.h"
#include "session/session_fields.h"
#include "session/session_impl.h"

namespace detinfer {

namespace {
SessionOptions resolve_options(SessionOptions o) {
  if (o.threads == 0) {
    o.threads = static_cast<std::int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  }
  session::check_session_ranges(o);  // every ranged row of the table (session/session_fields.h)
  try {
    o.device = to_string(parse_device(o.device));
  } catch (const Error& e) {
    throw Error(e.code(), "SessionOptions." + e.message(), "device");
  }
  return o;
}

core::DType kv_storage_dtype(KvDType d) {
  switch (d) {
    case KvDType::kF32:
      return core::DType::kF32;
    case KvDType::kBF16:
      return core::DType::kBF16;
    case KvDType::kF16:
      return core::DType::kF16;
  }
  throw Error(ErrorCode::kInvalidArgument,
              str_cat("SessionOptions.kv_dtype has the invalid value ", static_cast<int>(d)),
              "kv_dtype");
}

// SessionOptions::weights: "native" (the weights as stored), a quantized format's name or a
// mix's (model::parse_quant_scheme).
std::optional<model::QuantScheme> weight_format(const std::string& w) {
  model::QuantScheme s;
  if (w == "native") return std::nullopt;
  if (model::parse_quant_scheme(w, &s)) return s;
  throw Error(ErrorCode::kInvalidArgument,
              str_cat("SessionOptions.weights: expected native | ", model::quant_scheme_names(),
                      ", got '", w, "'"),
              "weights");
}

// Enough for max_batch sequences of a full context, but at most a quarter of the memory
// this process may use (cgroup limit or physical memory; 256 MiB when both are unknown).
// The pool is allocated zero-filled by the backend, so untouched blocks cost no RAM.
// K + V of one token as stored: 4 bytes per element for f32, 2 for bf16/f16.
std::int64_t kv_bytes_per_token(const model::ModelConfig& c, const SessionOptions& o) {
  const auto elem = static_cast<std::int64_t>(core::dtype_size(kv_storage_dtype(o.kv_dtype)));
  return 2 * c.num_layers * c.num_kv_heads * c.head_dim * elem;
}

std::int64_t auto_kv_budget(const model::ModelConfig& c, const SessionOptions& o) {
  const std::int64_t per_token = kv_bytes_per_token(c, o);
  const std::int64_t limit = core::memory_limit_bytes();
  const std::int64_t cap = limit > 0 ? limit / 4 : std::int64_t{256} << 20;
  const std::int64_t want = std::int64_t{o.max_batch} * c.max_position_embeddings * per_token;
  return std::max<std::int64_t>(std::min(want, cap), per_token * o.kv_block_size);
}
}  // namespace

void RequestHandle::cancel() const {
  if (cancel_) cancel_();
}

DeterministicSession::DeterministicSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeterministicSession::~DeterministicSession() {
  if (impl_) close();
}
DeterministicSession::DeterministicSession(DeterministicSession&&) noexcept = default;
DeterministicSession& DeterministicSession::operator=(DeterministicSession&& other) noexcept {
  if (this != &other) {
    if (impl_) close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

DeterministicSession DeterministicSession::open(const std::string& model_dir,
                                                const SessionOptions& options) {
  if (options.log_level) set_log_level(*options.log_level);
  auto impl = std::make_unique<Impl>();
  impl->options = resolve_options(options);
  model::ModelOptions mo;
  mo.mode = impl->options.mode;
  mo.threads = impl->options.threads;
  mo.device = parse_device(impl->options.device);
  // The tokenizer first: parsing a large tokenizer.json peaks at several times the file's
  // size, and that peak should not sit on top of the weights. Its freed parse tree goes
  // back to the system before the weights are packed.
  mo.kv_dtype = kv_storage_dtype(impl->options.kv_dtype);
  mo.weights = weight_format(impl->options.weights);
  session::ModelMetadata meta =
      session::read_model_metadata(model_dir, impl->options.chat_template_path);
  impl->tokenizer = std::move(meta.tokenizer);
  if (impl->tokenizer) core::release_free_heap();
  impl->model = model::Model::load(model_dir, mo, std::move(meta.gguf_model));
  const model::ModelConfig& mc = impl->model->config();
  if (impl->tokenizer && impl->tokenizer->vocab_size() > mc.vocab_size) {
    fail(ErrorCode::kCorrupt, meta.tokenizer_origin, " has ", impl->tokenizer->vocab_size(),
         " tokens but the model's vocab_size is ", mc.vocab_size);
  }
  impl->load_chat(model_dir, meta);
  if (impl->options.kv_budget_bytes == 0) {
    impl->options.kv_budget_bytes = auto_kv_budget(mc, impl->options);
  }
  if (!impl->options.draft_model_path.empty()) {
    // Its own pool, holding as many tokens as the target's.
    const SessionOptions& o = impl->options;
    impl->draft = session::DraftModel::open(
        o.draft_model_path, mo, impl->tokenizer ? &*impl->tokenizer : nullptr, mc,
        [&](const model::ModelConfig& c) {
          return o.kv_budget_bytes / kv_bytes_per_token(mc, o) * kv_bytes_per_token(c, o);
        },
        o.kv_block_size);
  }
  engine::EngineOptions eo;
  eo.max_batch = impl->options.max_batch;
  eo.prefill_chunk_tokens = impl->options.prefill_chunk_tokens;
  eo.max_queue = impl->options.max_queue;
  eo.kv_block_size = impl->options.kv_block_size;
  eo.kv_budget_bytes = impl->options.kv_budget_bytes;
  impl->build_pipeline(
      eo, (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}());
  logger().info("session opened: {} ({}), mode {}, device {}, {} threads, {} KV blocks", model_dir,
                to_string(mc.architecture), to_string(impl->options.mode), impl->options.device,
                impl->options.threads, impl->engine->kv_capacity_blocks());
  return DeterministicSession(std::move(impl));
}

void DeterministicSession::Impl::build_pipeline(const engine::EngineOptions& eo,
                                                std::uint64_t seed_key) {
  prep = std::make_unique<session::RequestPrep>(model->config(), tokenizer ? &*tokenizer : nullptr,
                                                seed_key);
  engine = std::make_unique<engine::Engine>(*model, tokenizer ? &*tokenizer : nullptr, eo);
  if (engine->kv_capacity_blocks() < 1) {
    fail(ErrorCode::kInvalidArgument, "SessionOptions.kv_budget_bytes (", options.kv_budget_bytes,
         ") is smaller than one KV block");
  }
  numerics = session::build_numerics_identity(options, *model);
  caches = std::make_shared<session::CacheBridge>(options, *model, numerics, tokenizer_hash);
  telemetry = std::make_shared<session::Telemetry>(
      options, session::session_base_fingerprint(options, *model, numerics, tokenizer_hash),
      caches);
  replayer = std::make_unique<session::Replayer>(*prep, *engine, telemetry->base(),
                                                 telemetry->session_metrics());
  verifier = std::make_unique<session::Verifier>(*prep, *engine, telemetry->base(),
                                                 model->config().vocab_size, options.max_batch,
                                                 tokenizer ? &*tokenizer : nullptr);
  if (options.consistency.enabled) {
    session::Replayer* r = replayer.get();  // the monitor is stopped before the replayer goes away
    monitor = std::make_unique<ConsistencyMonitor>(
        options.consistency.monitor, [r](const RunFingerprint& fp) { return r->rerun(fp); },
        options.consistency.alarm, &telemetry->session_metrics());
    telemetry->set_monitor(monitor.get());
  }
  // Observers run in this order: the result is stored before it is recorded.
  if (caches->has_prefix_cache()) engine->set_prefix_provider(caches);
  engine->add_observer(caches);
  engine->add_observer(telemetry);
  if (options.distribution_interval > 0) {
    engine->add_observer(std::make_shared<session::DistributionStats>(
        telemetry->registry(), options.distribution_interval, options.distribution_window));
  }
}

void DeterministicSession::Impl::attach_drafter(engine::EngineRequest& r) const {
  if (r.config.draft_tokens == 0 || !r.config.draft_with_model) return;
  if (!draft) {
    throw Error(ErrorCode::kInvalidArgument,
                "GenerationConfig.draft_with_model: the session has no draft model (open it with "
                "SessionOptions.draft_model_path)",
                "draft_with_model");
  }
  r.drafter = draft->drafter(r.prompt);
}

void DeterministicSession::Impl::shutdown() {
  if (prep) prep->close();
  if (engine) engine->shutdown();
  monitor.reset();  // its replays failed with the engine; join the worker
}

RequestHandle DeterministicSession::submit(const Prompt& prompt, const GenerationConfig& config,
                                           TokenCallback on_token) {
  engine::EngineRequest r = impl_->prep->prepare(prompt, config, std::move(on_token));
  impl_->attach_drafter(r);
  RequestHandle h;
  h.id_ = r.id;
  h.cancel_ = impl_->engine->canceller(r.cancelled);
  if (std::optional<GenerationResult> hit = impl_->caches->lookup(r)) {
    impl_->telemetry->served(r, *hit);
    std::promise<GenerationResult> p;
    p.set_value(std::move(*hit));
    h.future_ = p.get_future();
    return h;
  }
  try {
    h.future_ = impl_->engine->submit(std::move(r));
  } catch (const Error&) {
    impl_->caches->forget(h.id_);  // e.g. queue full: drop a pending result-cache audit
    throw;
  }
  return h;
}

GenerationResult DeterministicSession::generate(const Prompt& prompt,
                                                const GenerationConfig& config,
                                                TokenCallback on_token) {
  return submit(prompt, config, std::move(on_token)).get();
}

VerifyResult DeterministicSession::verify(const Transcript& transcript) {
  return verify(std::vector<Transcript>{transcript}).front();
}

std::vector<VerifyResult> DeterministicSession::verify(const std::vector<Transcript>& transcripts) {
  // Chat transcripts: their conversations must render to their prompt ids (left-out ids
  // are filled in). One that does not is reported at its first differing prompt id, ahead
  // of whatever its generated steps would show.
  std::vector<Transcript> resolved = transcripts;
  const std::vector<std::optional<VerifyDivergence>> prompt =
      session::resolve_chat_prompts(*this, resolved);
  std::vector<VerifyResult> out = impl_->verifier->verify(resolved);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!prompt[i]) continue;
    out[i].verified = false;
    out[i].divergence = prompt[i];
    out[i].message =
        "diverged at the prompt: the conversation does not render to the "
        "recorded prompt ids (first difference at prompt id " +
        std::to_string(prompt[i]->step) + ")";
  }
  return out;
}

void DeterministicSession::close() { impl_->shutdown(); }

bool DeterministicSession::closed() const { return impl_->prep->closed(); }

const Tokenizer* DeterministicSession::tokenizer() const {
  return impl_->tokenizer ? &*impl_->tokenizer : nullptr;
}

std::vector<std::int32_t> DeterministicSession::encode(const std::string& text) const {
  if (!impl_->tokenizer)
    fail(ErrorCode::kUnsupported,
         "the model has no tokenizer (no tokenizer.json, or a GGUF file without "
         "tokenizer.ggml.model)");
  return impl_->tokenizer->encode(text);
}

std::string DeterministicSession::model_fingerprint() const {
  return impl_->model->fingerprint().hex();
}
std::string DeterministicSession::tokenizer_hash() const {
  return impl_->tokenizer ? impl_->tokenizer_hash.hex() : std::string();
}
NumericsMode DeterministicSession::mode() const { return impl_->options.mode; }
std::int32_t DeterministicSession::threads() const { return impl_->options.threads; }
const std::vector<std::int32_t>& DeterministicSession::eos_token_ids() const {
  return impl_->model->config().eos_token_ids;
}
std::int64_t DeterministicSession::vocab_size() const { return impl_->model->config().vocab_size; }
std::int64_t DeterministicSession::context_length() const {
  return impl_->model->config().max_position_embeddings;
}
std::string DeterministicSession::architecture() const {
  return to_string(impl_->model->config().architecture);
}
const SessionOptions& DeterministicSession::options() const { return impl_->options; }

SessionStats DeterministicSession::stats() const {
  const engine::EngineStats e = impl_->engine->stats();
  SessionStats s;
  s.queued = e.queued;
  s.running = e.running;
  s.kv_blocks_in_use = e.kv_blocks_in_use;
  s.kv_blocks_capacity = e.kv_blocks_capacity;
  s.steps = e.steps;
  s.draft_tokens = e.draft_tokens;
  s.accepted_draft_tokens = e.accepted_draft_tokens;
  const auto tally = [&](engine::Drafter d) {
    const engine::DraftTally& t = e.by_drafter[static_cast<int>(d)];
    return DrafterStats{t.drafted, t.accepted};
  };
  s.ngram_drafts = tally(engine::Drafter::kNgram);
  s.model_drafts = tally(engine::Drafter::kModel);
  s.preemptions = e.preemptions;
  s.resumptions = e.resumptions;
  return s;
}

ModelFootprint DeterministicSession::footprint() const {
  const model::Model& m = *impl_->model;
  const model::ModelConfig& c = m.config();
  ModelFootprint f;
  f.weight_bytes = m.weight_bytes();
  f.resident_bytes = m.resident_bytes();
  f.decode_read_bytes = m.decode_read_bytes();
  // K and V as stored: 4 bytes per element (f32) or 2 (bf16/f16 KV).
  f.kv_bytes_per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim *
                         static_cast<std::int64_t>(core::dtype_size(m.kv_dtype()));
  const engine::EngineStats e = impl_->engine->stats();
  const std::int64_t block = f.kv_bytes_per_token * impl_->options.kv_block_size;
  f.kv_reserved_bytes = e.kv_blocks_capacity * block;
  f.kv_in_use_bytes = e.kv_blocks_in_use * block;
  return f;
}

}  // namespace detinfer
