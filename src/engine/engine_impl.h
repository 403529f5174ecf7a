// Internal to the engine module: the scheduler's state (Engine::Impl, engine.cpp:
// admission, batch building, forward, failure, shutdown; engine_preemption.cpp: KV
// admission and preemption). What happens to
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
  // Recomputation of preempted sequences (engine_preemption.cpp): the entries the output
  // stage handles are entries[0, processed); the rest are recompute chunks that end before
  // the sequence's last token, whose rows nothing reads. After the forward pass, each
  // sequence here advances its num_computed by the count (a chunk that ends at the last
  // token is a decode entry of 1 token and advances by the rest).
  std::size_t processed = 0;
  std::vector<std::pair<SeqState*, std::int64_t>> advance;
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

// Room for a step's logits rows that grows to the largest step and is never zero-filled
// (geometrically while one step appends several times).
struct StepLogits {
  std::unique_ptr<float[]> data;
  std::size_t size = 0;
  std::size_t capacity = 0;
  // Room for n more floats after the first `size` (which are kept when it grows).
  float* append(std::size_t n);
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
  std::int64_t reserved = 0;                      // guarded by mu: Group::reserve, summed
  std::int64_t running_seqs = 0;                  // guarded by mu
  std::atomic<std::int64_t> running_groups{0};
  std::atomic<std::int64_t> blocks_in_use{0};
  std::atomic<std::int64_t> steps{0};
  // Speculative decoding, all steps so far, per drafter (indexed by Drafter).
  std::atomic<std::int64_t> drafted[kDrafterCount] = {};
  std::atomic<std::int64_t> accepted[kDrafterCount] = {};
  std::atomic<std::int64_t> preemptions{0};  // KV admission, since the engine started
  std::atomic<std::int64_t> resumptions{0};
  std::int64_t next_order = 0;  // the next Group::order (scheduler only)
  // Model::kv_horizon(): > 0 when every layer slides over this many keys, and the blocks
  // no later row can see are released (engine_window.cpp).
  std::int64_t horizon = 0;

  std::vector<std::unique_ptr<Group>> running;  // scheduler thread only, by Group::order
  // A step's logits ([rows][vocab], 19 MB at 32 rows of a 152k vocabulary, 155 MB for a
  // 256-row teacher-forced chunk), kept across steps so that each step does not map, fault
  // in and unmap fresh pages, and never zero-filled: forward_rows writes every float it
  // appends. Scheduler only.
  engine_internal::StepLogits step_logits;
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
        horizon(m.kv_horizon()),
        output({t, vocab, pool, observers, prefix, m}, [this](Group& g) { on_released(g); }) {}

  std::int64_t blocks_needed(std::int64_t prompt, const GenerationConfig& c) const {
    const std::int64_t width = std::max(c.num_beams, c.num_return_sequences);
    const std::int64_t per_seq = sequence_blocks(prompt, prompt + c.max_new_tokens);
    // Forks copy one partial block per sequence while the parents still hold theirs.
    return width * per_seq + width;
  }

  // --- sliding windows (engine_window.cpp; docs/session.md "Sliding windows and the KV
  // cache"). The most blocks a sequence of `total` tokens holds at once, its prompt's
  // blocks kept while the prompt is prefilled: all of them, or with a horizon, the bound
  // of a step's live blocks (window_blocks) when that is fewer.
  std::int64_t sequence_blocks(std::int64_t prompt, std::int64_t total) const;
  // The live blocks of a step of at most recompute_chunk() tokens, with the horizon.
  std::int64_t window_blocks() const;
  // Tokens a recompute chunk of a windowed sequence carries at most: the prefill chunk,
  // capped at the window so that window_blocks() stays small.
  std::int64_t recompute_chunk() const;
  // Releases the blocks of every decoding or recomputing sequence that no row at its next
  // position or later can see. Runs before the batch is built.
  void release_dead_blocks();

  // --- scheduler (engine.cpp): admission, reservations, batch building, forward,
  // failure, shutdown. It hands each step's rows to `output`.
  void loop();
  // Under mu: what cancellers took out of the queue.
  void take_abandoned(std::vector<std::unique_ptr<Group>>& out);
  // Resolves them (observers first) with an empty cancelled result.
  void retire_abandoned(std::vector<std::unique_ptr<Group>>& abandoned);
  void admit(std::vector<std::unique_ptr<Group>>& admitted);
  // A request's first sequence, its prefix-cache restore and its beam search.
  void start_prefill(Group& g);
  // The queue depth and blocks in use as they are now, to the observers (on_gauges).
  void publish_gauges();
  void step();
  void build_batch(Batch& b);

  // --- KV admission and preemption (engine_preemption.cpp; docs/session.md).
  // Blocks a queued request must find free to be admitted (without the headroom).
  std::int64_t admission_blocks(const Group& g) const;
  // Blocks a running request will still allocate that are promised to it: the rest of its
  // (re)prefill, or of a beam search's worst case.
  std::int64_t owed_blocks(const Group& g) const;
  // Free blocks not promised to anyone: what decode growth and drafts may take.
  std::int64_t growth_blocks() const;
  // Admission in arrival order within the batch and block limits; under mu.
  void admit_from_queue(std::vector<std::unique_ptr<Group>>& admitted,
                        std::vector<std::unique_ptr<Group>>& cancelled);
  // Before a step's batch is built: every decoding sequence gets the block its next token
  // needs, preempting the youngest preemptible request while they do not fit. Returns the
  // free blocks left for drafts.
  std::int64_t make_room();
  void preempt(std::size_t running_index);
  // A sequence that lost its K/V: its prompt and generated tokens are recomputed (one
  // prefill chunk per step; the chunk that reaches the last token samples the next).
  bool recomputing(const Group& g, const SeqState& s) const {
    return !s.finished &&
           s.num_computed + 1 < static_cast<std::int64_t>(g.req.prompt.size() + s.generated.size());
  }
  void add_recompute_chunks(Batch& b, std::int64_t& budget);
  // With a prefix cache: a preempted sample's full blocks (prompt and generated tokens with
  // K/V) are published, and restored when it resumes, so that only the rest is recomputed.
  void publish_computed(const Group& g, const SeqState& s);
  void restore_computed(const Group& g, SeqState& s);
  // A preempted request cancelled while it waited: finished with what it has.
  void finish_preempted(Group& g);

  // The output stage's release hook: a group gave its blocks back (finished or failed).
  void on_released(Group& g);
};

}  // namespace detinfer::engine
