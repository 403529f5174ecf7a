// The first stage of a session's request pipeline: a prompt and a GenerationConfig become
// a validated EngineRequest (prompt tokenized and checked against vocabulary and context,
// config validated, stop ids resolved, seed chosen, id assigned, policy set). Replays and
// the consistency monitor prepare their requests here too. docs/architecture.md,
// "A session's request pipeline".
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "detinfer/session.h"
#include "engine/engine.h"
#include "model/model_config.h"

namespace detinfer::session {

// What the stages after the engine do with a request (carried on the EngineRequest).
struct RequestPolicy {
  bool use_caches = true;  // prefix and result caches
  bool observed = true;    // metrics, fingerprint recorder, consistency monitor
};

// Thread-safe.
class RequestPrep {
 public:
  // `config` and `tokenizer` (may be null: token-id prompts only) must outlive this.
  // Seeds drawn for requests without one are the low 53 bits of Philox(seed_key, counter).
  RequestPrep(const model::ModelConfig& config, const Tokenizer* tokenizer, std::uint64_t seed_key);

  // Errors name the offending field in Error::field() ("prompt", or a GenerationConfig
  // key); Error(kUnavailable) after close().
  engine::EngineRequest prepare(const Prompt& prompt, const GenerationConfig& config,
                                TokenCallback on_token, RequestPolicy policy = {});

  void close() { closed_.store(true); }
  bool closed() const { return closed_.load(); }

 private:
  // The prompt's token ids, checked against the vocabulary and the context.
  std::vector<std::int32_t> tokenize(const Prompt& prompt) const;

  const model::ModelConfig& config_;
  const Tokenizer* tokenizer_;
  const std::uint64_t seed_key_;
  std::atomic<std::uint64_t> seed_counter_{0};
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<bool> closed_{false};
};

}  // namespace detinfer::session
