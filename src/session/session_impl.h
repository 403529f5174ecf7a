// The inside of a DeterministicSession, for the modules it composes: the caches
// (issue 7), the metrics registry and fingerprint recorder (issue 8) attach here through
// the engine's hooks (engine/engine_hooks.h) and the result-cache seam below.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "detinfer/session.h"
#include "engine/engine.h"
#include "model/model.h"

namespace detinfer {

class SessionServices;

// Consulted by submit() after validation, before a request is queued: a hit is returned
// to the caller without running the model (e.g. the result cache). Must be thread-safe.
class ResultShortcut {
 public:
  virtual ~ResultShortcut() = default;
  virtual std::optional<GenerationResult> lookup(const EngineRequest& request) = 0;
};

struct DeterministicSession::Impl {
  SessionOptions options;  // resolved
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<Engine> engine;
  std::atomic<bool> closed{false};
  std::atomic<std::uint64_t> next_id{1};
  // Seeds drawn for requests without one: the low 53 bits of Philox(seed_key, counter),
  // seed_key from std::random_device at open (53 bits: exact as a JSON double).
  std::uint64_t seed_key = 0;
  std::atomic<std::uint64_t> seed_counter{0};
  std::shared_ptr<ResultShortcut> result_shortcut;  // set before the first request
  // Caches, metrics, recorder, monitor and replay (session_services.h); set at open.
  std::shared_ptr<SessionServices> services;

  // The prompt's token ids, checked against the vocabulary and the context.
  std::vector<std::int32_t> tokenize_prompt(const Prompt& prompt, const ModelConfig& mc) const;
  // Validates and normalizes a request (stop ids resolved, seed chosen). Errors name the
  // offending field in Error::field() ("prompt", or a GenerationConfig key).
  EngineRequest prepare(const Prompt& prompt, const GenerationConfig& config,
                        TokenCallback on_token);
};

}  // namespace detinfer
