// DeterministicSession: open a model folder and generate from any number of threads.
// Every request's output is a pure function of (model, prompt, GenerationConfig, seed) in
// canonical mode, whatever else the session is doing: requests are batched together
// (continuous batching) without changing a bit of any of them. docs/session.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/export.h"
#include "detinfer/generation.h"
#include "detinfer/logging.h"
#include "detinfer/numerics.h"
#include "detinfer/tokenizer.h"

namespace detinfer {

struct SessionOptions {
  NumericsMode mode = NumericsMode::kCanonical;  // kFast: libtorch kernels, no guarantee
  std::int32_t threads = 0;                      // kernel threads 1..1024; 0 = all cores
  std::int64_t kv_budget_bytes = 0;              // KV pool; 0 = auto (min(256 MiB, max_batch
                                                 // sequences of min(context, 4096) tokens))
  std::int32_t kv_block_size = 16;               // tokens per KV block: 1..1024
  std::int32_t max_batch = 32;                   // sequences decoded per step: 1..4096
  std::int32_t prefill_chunk_tokens = 256;       // prompt tokens per step: 1..1048576
  std::int32_t max_queue = 256;                  // waiting requests: 1..1048576
  std::optional<LogLevel> log_level;             // unset: keep the current level
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
  // Thread-safe. The request stops at the next step and finishes with
  // FinishReason::kCancelled and what it generated so far.
  void cancel() const;
  std::future<GenerationResult>& future() { return future_; }
  // Waits; throws the request's Error if it failed.
  GenerationResult get() { return future_.get(); }

 private:
  friend class DeterministicSession;
  std::uint64_t id_ = 0;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::future<GenerationResult> future_;
};

struct SessionStats {
  std::int64_t queued = 0;   // waiting for admission
  std::int64_t running = 0;  // admitted, generating
  std::int64_t kv_blocks_in_use = 0;
  std::int64_t kv_blocks_capacity = 0;
  std::int64_t steps = 0;  // batched forward passes so far
};

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

  // Stops the engine: waiting and running requests fail with Error(kUnavailable), and
  // every later call does too. Idempotent; thread-safe.
  void close();
  bool closed() const;

  // The tokenizer of the model folder, or nullptr when it has no tokenizer.json.
  const Tokenizer* tokenizer() const;
  // Token ids of a text (Error(kUnsupported) without a tokenizer).
  std::vector<std::int32_t> encode(const std::string& text) const;

  std::string model_fingerprint() const;  // 32 hex digits (docs/fingerprint-model.md)
  std::string tokenizer_hash() const;     // 32 hex digits; "" without a tokenizer
  NumericsMode mode() const;
  std::int32_t threads() const;
  const std::vector<std::int32_t>& eos_token_ids() const;  // the default stop tokens
  std::int64_t vocab_size() const;
  std::int64_t context_length() const;
  std::string architecture() const;       // Hugging Face class name, e.g. "Qwen2ForCausalLM"
  const SessionOptions& options() const;  // with 0 (auto) fields resolved
  SessionStats stats() const;

  // For the modules the session composes (caches, metrics, fingerprint recorder):
  // src/session/session_impl.h.
  struct Impl;
  Impl& impl();

 private:
  explicit DeterministicSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace detinfer
