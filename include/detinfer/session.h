// DeterministicSession: open a model folder and generate from any number of threads.
// Every request's output is a pure function of (model, prompt, GenerationConfig, seed) in
// canonical mode, whatever else the session is doing: requests are batched together
// (continuous batching) without changing a bit of any of them. docs/session.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/cache_options.h"
#include "detinfer/chat.h"
#include "detinfer/consistency_monitor.h"
#include "detinfer/export.h"
#include "detinfer/fingerprint_recorder.h"
#include "detinfer/generation.h"
#include "detinfer/logging.h"
#include "detinfer/metrics.h"
#include "detinfer/numerics.h"
#include "detinfer/replay_report.h"
#include "detinfer/tokenizer.h"
#include "detinfer/transcript.h"

namespace detinfer {

// The live consistency monitor (docs/fingerprint.md, "Consistency monitor"): shadow
// replays of a deterministic sample of finished requests on this session.
struct ConsistencyOptions {
  bool enabled = false;               // off by default: each replay costs a whole request
  ConsistencyMonitorOptions monitor;  // sample_rate 0.01, threshold 0.999, queue 64, ...
  ConsistencyAlarm alarm;             // optional; called on the monitor's thread
};

struct SessionOptions {
  // The numerics: kCanonical (bitwise = numerics spec v1 on any CPU or GPU), kFast (no
  // guarantee: libtorch on the CPU, tensor cores on CUDA), kDeviceInvariant (CUDA only:
  // invariant to batching, chunking and cache hits on one GPU model).
  NumericsMode mode = NumericsMode::kCanonical;
  // "cpu", "cuda" (= "cuda:0") or "cuda:N": where weights, KV cache and kernels live
  // (docs/cuda.md). Sampling, caches and fingerprints run on the host either way.
  std::string device = "cpu";
  // KV cache storage precision (docs/numerics.md, "KV storage"): kF32 (default) keeps K/V
  // as computed; kBF16/kF16 round them to nearest-even when cached. Part of the numerics:
  // recorded in fingerprints and cache keys. Canonical mode on the CPU only (else
  // Error(kUnsupported, field "kv_dtype")).
  KvDType kv_dtype = KvDType::kF32;
  // Weight format of the linears (docs/numerics.md, "Quantized linear"): "native" (default:
  // the weights as stored, f32/bf16/f16), a format ("q8_0", "q4_0", "q5_0", "q4_1", "q5_1",
  // "q2_k" .. "q6_k") or a llama.cpp mix choosing one per tensor ("q3_k_m", "q4_k_s",
  // "q4_k_m", "q5_k_s", "q5_k_m"; docs/gguf.md), quantized on load with the spec's
  // deterministic quantizers; a tied embedding is the quantized lm_head. Part of the
  // numerics: recorded in fingerprints and cache keys. Canonical mode only, CPU or CUDA (else
  // Error(kUnsupported, field "weights")); another name is Error(kInvalidArgument).
  std::string weights = "native";
  std::int32_t threads = 0;                 // kernel threads 1..1024; 0 = all cores
  std::int64_t kv_budget_bytes = 0;         // KV pool; 0 = auto: max_batch full contexts,
                                            // at most 1/4 of the memory limit (cgroup)
  std::int32_t kv_block_size = 16;          // tokens per KV block: 1..1024
  std::int32_t max_batch = 32;              // sequences decoded per step: 1..4096
  std::int32_t prefill_chunk_tokens = 256;  // prompt tokens per step: 1..1048576
  std::int32_t max_queue = 256;             // waiting requests: 1..1048576
  std::optional<LogLevel> log_level;        // unset: keep the current level
  // Chat template file used instead of the model folder's (docs/chat.md): a .json file
  // ({"chat_template": ...}) or a Jinja file. "" = the model's own.
  std::string chat_template_path;
  // Speculative decoding's draft model (docs/speculative.md): a folder like model_dir
  // holding a smaller model with the same tokenizer. Requests opt in with
  // GenerationConfig::draft_with_model; its proposals change only speed, never an
  // output. "" = none.
  std::string draft_model_path;

  // Caches (docs/cache.md). Defaults: the KV-prefix cache ON with only its memory tier
  // (budget 20% of physical memory, filled only as prompts are cached; TTL 3600 s) —
  // a hit gives the same bits as a miss, so it is safe in canonical mode; disk and Redis
  // tiers off. The result cache OFF; when enabled it serves and stores only canonical-mode
  // requests (fast-mode outputs are not reproducible, so never cached).
  CacheOptions cache;
  std::string cache_salt;  // mixed into every prefix-cache key: different salts never share

  // Fingerprints (docs/fingerprint.md). Default: level "steps" in memory, no file and no
  // callback, so every GenerationResult carries fingerprint_json (one JSON serialization
  // per request: ~40 us for 64 tokens; "off" saves it).
  RecorderOptions recorder{kDefaultRecordLevel, {}, {}, true};
  ConsistencyOptions consistency;  // off by default

  // Next-token distribution metrics (docs/metrics.md): the top-1 probability and entropy
  // of every Nth generated token per sequence (histograms) and the variance of the top-1
  // probability over the last `distribution_window` of them (gauge).
  std::int32_t distribution_interval = 8;   // 0 = off; else 1..1048576
  std::int32_t distribution_window = 1024;  // 2..1048576
};

// A prompt as text (encoded with the model's tokenizer) or as token ids.
class DETINFER_API Prompt {
 public:
  Prompt(const char* text) : text_(text), is_text_(true) {}             // NOLINT: implicit
  Prompt(std::string text) : text_(std::move(text)), is_text_(true) {}  // NOLINT
  Prompt(std::vector<std::int32_t> ids) : ids_(std::move(ids)) {}       // NOLINT
  Prompt(std::initializer_list<std::int32_t> ids) : ids_(ids) {}        // NOLINT

  bool is_text() const { return is_text_; }
  const std::string& text() const { return text_; }
  const std::vector<std::int32_t>& ids() const { return ids_; }

 private:
  std::string text_;
  std::vector<std::int32_t> ids_;
  bool is_text_ = false;
};

// A submitted request: its result and a way to cancel it.
class DETINFER_API RequestHandle {
 public:
  RequestHandle() = default;
  std::uint64_t id() const { return id_; }
  // Thread-safe. A queued request leaves the queue at once and finishes with
  // FinishReason::kCancelled and no tokens; a running one stops after the step in flight
  // and finishes with what it generated so far. Either way its KV blocks and queue slot
  // are free (stats() and the gauges show it) by the time its future is ready.
  void cancel() const;
  std::future<GenerationResult>& future() { return future_; }
  // Waits; throws the request's Error if it failed.
  GenerationResult get() { return future_.get(); }

 private:
  friend class DeterministicSession;
  std::uint64_t id_ = 0;
  std::function<void()> cancel_;  // sets the request's flag and wakes the scheduler
  std::future<GenerationResult> future_;
};

// One speculative decoding drafter's tokens since the session opened (docs/speculative.md).
struct DrafterStats {
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;  // equal to the token the target chose
};

struct SessionStats {
  std::int64_t queued = 0;   // waiting for admission
  std::int64_t running = 0;  // admitted, generating
  std::int64_t kv_blocks_in_use = 0;
  std::int64_t kv_blocks_capacity = 0;
  std::int64_t steps = 0;  // batched forward passes so far
  // Speculative decoding (docs/speculative.md): tokens drafted so far and how many of them
  // equalled the token the target chose (accepted: decoded without a pass of their own).
  std::int64_t draft_tokens = 0;
  std::int64_t accepted_draft_tokens = 0;
  DrafterStats ngram_drafts;  // the prompt-lookup drafter's share of the two above
  DrafterStats model_drafts;  // the draft model's (SessionOptions::draft_model_path)
  // KV admission (docs/session.md, "KV admission and preemption"): requests preempted
  // because the KV pool ran out during decode, and preempted requests resumed (each
  // resumes by recomputing its tokens; its output is unchanged).
  std::int64_t preemptions = 0;
  std::int64_t resumptions = 0;
};

// Memory and per-token traffic of the loaded model (benchmarks, capacity planning).
struct ModelFootprint {
  std::int64_t weight_bytes = 0;        // tensors as stored in the safetensors files
  std::int64_t resident_bytes = 0;      // what the loaded model holds in memory: weights
                                        //   as packed (one copy each), RoPE table, step
                                        //   buffers; not the KV pool (below)
  std::int64_t decode_read_bytes = 0;   // weight bytes a decode step reads per sequence:
                                        //   linears, lm_head, norms, one embedding row
                                        //   (mixture of experts: the router and k experts
                                        //   per sparse layer)
  std::int64_t kv_bytes_per_token = 0;  // K + V of one cached token over all layers
  std::int64_t kv_reserved_bytes = 0;   // the KV pool's capacity: address space, zero
                                        //   pages until a block is first used
  std::int64_t kv_in_use_bytes = 0;     // blocks held now by sequences and the prefix
                                        //   cache (a freed block is reused before an
                                        //   untouched one, so what the pool has ever
                                        //   touched is its peak use)
};

// The TranscriptChat (detinfer/transcript.h) of a conversation rendered with `options`,
// whose now_unix_seconds must be set (the time the prompt was rendered with), else
// Error(kInvalidArgument). `prompt_suffix`: text encoded after the rendering.
DETINFER_API TranscriptChat transcript_chat(const std::vector<ChatMessage>& messages,
                                            const ChatTemplateOptions& options,
                                            std::string prompt_suffix = {});

class DETINFER_API DeterministicSession {
 public:
  // Loads config.json + safetensors (+ tokenizer.json when present) from model_dir.
  // Throws Error: kInvalidArgument naming a SessionOptions field, or the model
  // loader's errors (kNotFound, kCorrupt, kUnsupported naming file and tensor).
  static DeterministicSession open(const std::string& model_dir,
                                   const SessionOptions& options = {});
  ~DeterministicSession();  // close()
  DeterministicSession(DeterministicSession&&) noexcept;
  DeterministicSession& operator=(DeterministicSession&&) noexcept;

  // Blocking generation. Throws Error: kInvalidArgument (a config field, an empty
  // prompt, a prompt longer than the context, token ids out of range),
  // kResourceExhausted (queue full), kUnavailable (closed). Thread-safe.
  GenerationResult generate(const Prompt& prompt, const GenerationConfig& config = {},
                            TokenCallback on_token = {});
  // Queues the request and returns at once; same errors as generate(), thrown here for
  // invalid input and through the future for failures while running.
  RequestHandle submit(const Prompt& prompt, const GenerationConfig& config = {},
                       TokenCallback on_token = {});

  // Chat (docs/chat.md). The prompt text the model's chat template makes of a
  // conversation, byte-identical to transformers' apply_chat_template. Throws
  // Error(kUnsupported) without a template, Error(kInvalidArgument) naming the field for
  // malformed options, template errors and the template's raise_exception() messages.
  // Thread-safe.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  const ChatTemplateOptions& options = {}) const;
  // Its token ids (encoded without adding special tokens: the template writes them).
  std::vector<std::int32_t> encode_chat(const std::vector<ChatMessage>& messages,
                                        const ChatTemplateOptions& options = {}) const;
  // generate() on encode_chat(messages, options). Start `config` from
  // default_generation_config() to get the model's defaults. The result's transcript is
  // the messages form (format /2: the conversation, its options and the time the prompt
  // was rendered with; unset now_unix_seconds is the clock, read once), which verify
  // checks renders to the prompt ids.
  GenerationResult chat(const std::vector<ChatMessage>& messages, const GenerationConfig& config,
                        const ChatTemplateOptions& options = {}, TokenCallback on_token = {});
  bool has_chat_template() const;
  // detinfer's GenerationConfig defaults with the model's generation_config.json applied
  // (do_sample, temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens /
  // max_length). stop_token_ids stays unset (= the model's eos ids).
  GenerationConfig default_generation_config() const;

  // Stops the engine: waiting and running requests fail with Error(kUnavailable), and
  // every later call does too. Idempotent; thread-safe.
  void close();
  bool closed() const;

  // The tokenizer of the model folder, or nullptr when it has no tokenizer.json.
  const Tokenizer* tokenizer() const;
  // Token ids of a text (Error(kUnsupported) without a tokenizer).
  std::vector<std::int32_t> encode(const std::string& text) const;

  std::string model_fingerprint() const;  // 32 hex digits (docs/fingerprint-model.md)
  // 32 hex digits; "" without a tokenizer. Covers tokenizer.json, tokenizer_config.json
  // and the chat template in use when it comes from another file (docs/chat.md).
  std::string tokenizer_hash() const;
  NumericsMode mode() const;
  std::int32_t threads() const;
  const std::vector<std::int32_t>& eos_token_ids() const;  // the default stop tokens
  std::int64_t vocab_size() const;
  std::int64_t context_length() const;
  std::string architecture() const;       // Hugging Face class name, e.g. "Qwen2ForCausalLM"
  const SessionOptions& options() const;  // with 0 (auto) fields resolved
  SessionStats stats() const;
  ModelFootprint footprint() const;

  // Metrics (docs/metrics.md): the session's registry and its Prometheus text (format
  // 0.0.4; cache statistics are brought up to date first). Thread-safe.
  MetricsRegistry& metrics();
  std::string metrics_text() const;
  // Statistics of the prefix and result caches (zero for caches that are off).
  CacheStats cache_stats() const;
  // Drops every entry of the memory and disk tiers of both caches (Redis entries expire
  // by TTL). Requests running meanwhile are unaffected.
  void invalidate_caches();
  ConsistencyStats consistency_stats() const;  // zero when the monitor is off

  // Re-runs the request a fingerprint records (prompt ids, normalized config, seed) on
  // this session, bypassing both caches, and compares tokens, finish reasons and every
  // recorded digest. Refuses (without running) when the model or tokenizer differ, the
  // prompt ids were not recorded, or the request is invalid here. Runs alongside other
  // requests (batched with them, which in canonical mode changes no bit). The string
  // overload parses one fingerprint (RunFingerprint::from_json errors propagate).
  ReplayReport replay(const RunFingerprint& fingerprint);
  ReplayReport replay(const std::string& fingerprint_json);

  // Verification without regeneration (docs/fingerprint.md, "Transcripts and
  // verification"): runs each sample's prompt + output through one chunked prefill with
  // every position's logits (batched with other requests, caches bypassed), recomputes
  // every step's token choice (greedy or the seeded draw) and digest, and reports
  // verified or the first divergent step. Throws Error(kInvalidArgument) naming the field
  // when the transcript names another model fingerprint, weight format, numerics spec,
  // mode or KV format, or is invalid for this model (ids out of the vocabulary, prompt
  // too long, config out of range); Error(kUnsupported) for beam search transcripts or a
  // session that is not in canonical mode. Thread-safe. The vector overload verifies all
  // transcripts together (their requests share the engine's batches); results in order.
  VerifyResult verify(const Transcript& transcript);
  std::vector<VerifyResult> verify(const std::vector<Transcript>& transcripts);

 private:
  friend struct SessionInternals;  // src/session/session_internal.h (tests only)
  struct DETINFER_LOCAL Impl;
  explicit DeterministicSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace detinfer
