// Internal to the engine module: the scheduler's state (Engine::Impl, engine.cpp:
// admission, reservations, batch building, forward, failure, shutdown). What happens to
// a step's logits rows is the output stage's (output_stage.h).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "engine/block_table.h"
#include "engine/engine.h"
#include "engine/engine_state.h"
#include "engine/output_stage.h"
#include "model/model.h"

namespace detinfer::engine {
namespace engine_internal {

// One step's forward batch: entries[i] describes steps[i] and logits row i.
struct Batch {
  std::vector<model::SequenceStep> steps;
  std::vector<BatchEntry> entries;
  StepStats stats;
};

// What a canceller reaches the scheduler through: it may outlive the engine, so the engine
// detaches itself here when it shuts down.
struct Waker {
  std::mutex mu;
  Engine::Impl* engine = nullptr;  // guarded by mu; null once the engine shuts down
  // Takes the request with this flag out of the queue (if it waits there) and wakes the
  // scheduler, which resolves it.
  void cancel(const std::atomic<bool>* flag);
};

}  // namespace engine_internal

using engine_internal::Batch;

struct Engine::Impl {
  model::Model& model;
  const Tokenizer* tokenizer;
  EngineOptions options;
  model::KvCachePool pool;
  std::int64_t vocab;
  std::vector<std::shared_ptr<EngineObserver>> observers;
  std::shared_ptr<PrefixProvider> prefix;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Group>> queue;       // guarded by mu
  bool stopping = false;                          // guarded by mu
  bool cancel_pending = false;                    // guarded by mu: a canceller ran
  std::vector<std::unique_ptr<Group>> abandoned;  // guarded by mu: cancelled, out of the queue
  std::int64_t reserved = 0;                      // guarded by mu
  std::int64_t running_seqs = 0;                  // guarded by mu
  std::atomic<std::int64_t> running_groups{0};
  std::atomic<std::int64_t> blocks_in_use{0};
  std::atomic<std::int64_t> steps{0};
  std::atomic<std::int64_t> drafted{0};  // speculative decoding, all steps so far
  std::atomic<std::int64_t> accepted{0};

  std::vector<std::unique_ptr<Group>> running;  // scheduler thread only
  // A step's logits ([rows][vocab], 19 MB at 32 rows of a 152k vocabulary), kept across
  // steps so that each step does not map, fault in and unmap fresh pages. Scheduler only.
  std::vector<float> step_logits;
  OutputStage output;  // scheduler thread only
  std::thread thread;
  std::once_flag shutdown_once;
  std::shared_ptr<engine_internal::Waker> waker = std::make_shared<engine_internal::Waker>();

  Impl(model::Model& m, const Tokenizer* t, const EngineOptions& o)
      : model(m),
        tokenizer(t),
        options(o),
        pool(m.config(), o.kv_block_size, o.kv_budget_bytes, m.kv_backend(), m.kv_dtype()),
        vocab(m.config().vocab_size),
        output({t, vocab, pool, observers, prefix}, [this](Group& g) { on_released(g); }) {}

  std::int64_t blocks_needed(std::int64_t prompt, const GenerationConfig& c) const {
    const std::int64_t bs = pool.block_size();
    const std::int64_t width = std::max(c.num_beams, c.num_return_sequences);
    const std::int64_t per_seq = (prompt + c.max_new_tokens + bs - 1) / bs;
    // Forks copy one partial block per sequence while the parents still hold theirs.
    return width * per_seq + width;
  }

  // --- scheduler (engine.cpp): admission, reservations, batch building, forward,
  // failure, shutdown. It hands each step's rows to `output`.
  void loop();
  // Under mu: what cancellers took out of the queue.
  void take_abandoned(std::vector<std::unique_ptr<Group>>& out);
  // Resolves them (observers first) with an empty cancelled result.
  void retire_abandoned(std::vector<std::unique_ptr<Group>>& abandoned);
  void admit(std::vector<std::unique_ptr<Group>>& admitted);
  // The queue depth and blocks in use as they are now, to the observers (on_gauges).
  void publish_gauges();
  void step();
  void build_batch(Batch& b);

  // The output stage's release hook: a group gave its blocks back (finished or failed).
  void on_released(Group& g);
};

}  // namespace detinfer::engine
