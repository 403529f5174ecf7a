// Continuous batching: one scheduler thread owns the model's forward pass and the KV
// pool. Every step it admits queued requests whose prompts fit the free KV blocks
// (preempting the youngest request when the pool runs out during decode;
// docs/session.md, "KV admission and preemption"), runs chunked prefill within a token budget and
// decodes one token for every running sequence, all in ONE batched Model::forward call. In
// canonical mode each logits row is a pure function of its own sequence, so a request's output
// never depends on its batch mates (docs/session.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "detinfer/generation.h"
#include "detinfer/tokenizer.h"
#include "engine/engine_hooks.h"

namespace detinfer::model {
class Model;
}  // namespace detinfer::model

namespace detinfer::engine {

struct EngineOptions {
  std::int32_t max_batch = 32;              // sequences decoded together per step
  std::int32_t prefill_chunk_tokens = 256;  // prompt tokens per step, all requests together
  std::int32_t max_queue = 256;             // waiting requests before submit() fails
  std::int64_t kv_block_size = 16;          // tokens per KV block
  std::int64_t kv_budget_bytes = 64 << 20;  // KV pool size
};

using EngineClock = std::chrono::steady_clock;

// A validated request: config.stop_token_ids is resolved and `seed` is the one used.
struct EngineRequest {
  std::uint64_t id = 0;
  std::vector<std::int32_t> prompt;
  GenerationConfig config;
  std::uint64_t seed = 0;
  TokenCallback on_token;
  // Policy for the hooks around the engine (the scheduler itself ignores both). A replay
  // or shadow replay sets both false: it recomputes everything and is not a served request.
  bool use_caches = true;  // false: no prefix-cache restore or publish, no result cache
  bool observed = true;    // false: no metrics, fingerprint record or consistency check
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  EngineClock::time_point submitted = EngineClock::now();
  // Teacher forcing (transcript verification, docs/fingerprint.md): when set, the engine
  // only prefills `prompt` (in chunks, batched with other requests) and hands the raw
  // logits row of every position p >= score_from to score_row(p - score_from, row), in
  // order, on the engine thread; returning false cancels the request. Nothing is sampled;
  // the result has one empty sequence. In canonical mode each row has the bits the decode
  // step at that position computed.
  std::function<bool(std::int64_t step, const float* row)> score_row;
  // Optional, with score_row: called for every row of a chunk before score_row sees any
  // of them, concurrently for distinct ranges of steps (on the model's host threads, which
  // are idle then; one call per thread and chunk), so that per-row work that does not
  // depend on the earlier rows (a digest, a choice given the recorded tokens) runs in
  // parallel and can reuse its buffers across a range. `rows` holds the rows of steps
  // [step, step + count), each `vocab` floats after the previous one. Must not throw.
  std::function<void(std::int64_t step, const float* rows, std::int64_t count)> score_prepare;
  std::int64_t score_from = 0;
  // Speculative decoding (config.draft_tokens > 0, docs/speculative.md): when set, this
  // drafter replaces the n-gram drafter (tests and benchmarks: one that replays or
  // corrupts a known continuation). Called on the engine thread before each decode step
  // of a sample with its index and generated tokens (the last one's K/V not computed
  // yet); appends at most `max` proposed next tokens to `out` (empty on entry). Whatever
  // it proposes, the output is that of plain decoding.
  std::function<void(std::int32_t sample_index, const std::vector<std::int32_t>& generated,
                     std::int32_t max, std::vector<std::int32_t>& out)>
      drafter;
};

// The scheduler's counters; the session reports them as its SessionStats (the engine does
// not include the session's facade).
struct EngineStats {
  std::int64_t queued = 0;   // waiting for admission
  std::int64_t running = 0;  // admitted, generating
  std::int64_t kv_blocks_in_use = 0;
  std::int64_t kv_blocks_capacity = 0;
  std::int64_t steps = 0;  // batched forward passes so far
  // Speculative decoding (docs/speculative.md): drafted tokens, and those equal to the
  // token the model chose, over all drafters and per drafter (indexed by Drafter).
  std::int64_t draft_tokens = 0;
  std::int64_t accepted_draft_tokens = 0;
  DraftTally by_drafter[kDrafterCount];
  // KV admission (docs/session.md, "KV admission and preemption"): requests preempted when the pool
  // ran out during decode, and preempted requests admitted again.
  std::int64_t preemptions = 0;
  std::int64_t resumptions = 0;
};

class Engine {
 public:
  // `tokenizer` may be null (then results carry no text and stop strings never match).
  // Starts the scheduler thread.
  Engine(model::Model& model, const Tokenizer* tokenizer, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Before the first submit.
  void add_observer(std::shared_ptr<EngineObserver> observer);
  void set_prefix_provider(std::shared_ptr<PrefixProvider> provider);

  // Queues a request. Throws Error(kResourceExhausted) when the queue is full or the
  // request could never fit the KV pool, Error(kUnavailable) after shutdown(),
  // Error(kInvalidArgument, "draft_tokens") for speculative decoding in fast numerics mode.
  // Thread-safe.
  std::future<GenerationResult> submit(EngineRequest request);

  // What cancels a request whose EngineRequest::cancelled is `flag`: sets it and wakes the
  // scheduler, which then at once drops the request from the queue (an empty cancelled
  // result) or, at the end of the step in flight, finishes it with what it has; either
  // way its KV blocks and queue slot are free and the gauges updated before its future is
  // ready. Callable from any thread, any number of times, also after the engine is gone.
  std::function<void()> canceller(std::shared_ptr<std::atomic<bool>> flag) const;

  // KV blocks a request holds at most while it runs (prompt + max_new_tokens for every
  // sequence); submit() refuses a request whose need exceeds the pool's capacity.
  std::int64_t blocks_needed(std::int64_t prompt_tokens, const GenerationConfig& config) const;
  std::int64_t kv_capacity_blocks() const;

  // Stops the scheduler; queued and running requests fail with Error(kUnavailable).
  // Idempotent; the destructor calls it.
  void shutdown();

  EngineStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace detinfer::engine
