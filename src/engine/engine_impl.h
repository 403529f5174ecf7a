// Internal to the engine module: the scheduler's state (Engine::Impl) shared by
// engine.cpp (admission, batch building, forward, shutdown) and engine_output.cpp
// (per-sequence output: sampling, tokens, stops, beams, events, results).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "decode/beam_search.h"
#include "decode/sampler.h"
#include "decode/stop_matcher.h"
#include "decode/token_trie.h"
#include "detinfer/fingerprint.h"
#include "engine/block_table.h"
#include "engine/engine.h"
#include "model/model.h"

namespace detinfer::engine {
namespace engine_internal {

inline double ms_between(EngineClock::time_point a, EngineClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One KV sequence: a sample, a live beam, or the prompt while it is prefilled.
struct SeqState {
  std::int32_t sample_index = 0;
  std::vector<std::int32_t> blocks;
  std::int64_t num_computed = 0;  // tokens whose K/V are in `blocks`
  std::int32_t pending = -1;      // chosen token whose K/V is not computed yet
  // Speculative decoding (engine_speculative.cpp): the drafts fed after `pending` this
  // step, and the adaptive draft length: how many tokens to ask for (0: not yet set), the
  // steps left without drafting and the consecutive verify passes that accepted nothing.
  std::vector<std::int32_t> draft;
  std::int32_t draft_len = 0;
  std::int32_t draft_pause = 0;
  std::int32_t draft_misses = 0;
  std::vector<std::int32_t> generated;
  Sequence out;
  std::optional<Tokenizer::StreamDecoder> decoder;
  std::optional<decode::StopMatcher> stops;
  std::optional<decode::JsonState> json;  // constrained decoding: the text's position
  bool finished = false;
  EngineClock::time_point last_token;
};

// One request from admission to its result.
struct Group {
  EngineRequest req;
  std::promise<GenerationResult> promise;
  // KV blocks promised at admission (engine_preemption.cpp: its prompt, its recompute,
  // or a beam search's worst case); counted in Impl::reserved while it runs.
  std::int64_t reserve = 0;
  // Admission number: given at the first admission in queue order and kept when the
  // request is preempted and resumed; the youngest running request (highest number) is
  // the one preempted. -1 until admitted.
  std::int64_t order = -1;
  std::int32_t width = 1;  // sequences it runs
  bool prefilling = true;
  std::int64_t prefilled = 0;  // prompt tokens with K/V
  std::int64_t cached_tokens = 0;
  std::vector<SeqState> seqs;  // one while prefilling
  std::unique_ptr<decode::BeamSearch> beam;
  std::vector<Sequence> beam_results;
  std::shared_ptr<const decode::JsonGrammar> grammar;  // response_format; null for text
  EngineClock::time_point admitted;
  std::optional<EngineClock::time_point> first_token;
  EngineClock::time_point last_token;  // of sample 0 / of the beam search
  std::vector<double> token_ms;
  bool done = false;

  bool cancelled() const { return req.cancelled->load(std::memory_order_relaxed); }
};

// What one sequence contributed to the batch.
struct BatchEntry {
  Group* group;
  std::size_t seq;      // index in group->seqs
  std::int64_t tokens;  // new tokens fed
  bool prefill;
  std::int64_t rows = 1;  // logits rows it returned (tokens when all_logits)
};

// One step's forward batch: entries[i] describes steps[i] and logits row i.
struct Batch {
  std::vector<model::SequenceStep> steps;
  std::vector<BatchEntry> entries;
  StepStats stats;
  // Recomputation of preempted sequences (engine_preemption.cpp): the entries that
  // process_rows handles are entries[0, processed); the rest are recompute chunks that
  // end before the sequence's last token, whose rows nothing reads. After the forward
  // pass, each sequence here advances its num_computed by the count (a chunk that ends at
  // the last token is a decode entry of 1 token and advances by the rest).
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

}  // namespace engine_internal

using engine_internal::Batch;
using engine_internal::BatchEntry;
using engine_internal::Group;
using engine_internal::ms_between;
using engine_internal::SeqState;

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
  std::atomic<std::int64_t> drafted{0};  // speculative decoding, all steps so far
  std::atomic<std::int64_t> accepted{0};
  std::int64_t step_drafted = 0;  // this step's (scheduler only)
  std::int64_t step_accepted = 0;
  std::atomic<std::int64_t> preemptions{0};  // KV admission, since the engine started
  std::atomic<std::int64_t> resumptions{0};
  std::int64_t next_order = 0;  // the next Group::order (scheduler only)

  std::vector<std::unique_ptr<Group>> running;  // scheduler thread only, by Group::order
  // A step's logits ([rows][vocab], 19 MB at 32 rows of a 152k vocabulary), kept across
  // steps so that each step does not map, fault in and unmap fresh pages. Scheduler only.
  std::vector<float> step_logits;
  // Constrained decoding: the vocabulary's token texts, built at the first request with a
  // response_format (engine_structured.cpp). Scheduler only.
  std::unique_ptr<decode::TokenTrie> trie;
  std::vector<std::uint8_t> allowed;  // the mask of the sequence being sampled
  // The token choice's buffers (candidates, probabilities, the descending walk), reused
  // by every sequence of every step instead of ~10 vocabulary-sized allocations per token
  // (issue 33, item 5). Scheduler only.
  decode::SamplingWorkspace sampling;
  // Promises of failed requests, kept until the engine is destroyed: the exception's
  // reference count lives in (uninstrumented) libstdc++, so dropping the last reference on
  // this thread while the caller still reads the Error looks like a race to TSAN.
  std::vector<std::promise<GenerationResult>> failed_promises;
  std::thread thread;
  std::once_flag shutdown_once;
  std::shared_ptr<engine_internal::Waker> waker = std::make_shared<engine_internal::Waker>();

  Impl(model::Model& m, const Tokenizer* t, const EngineOptions& o)
      : model(m),
        tokenizer(t),
        options(o),
        pool(m.config(), o.kv_block_size, o.kv_budget_bytes, m.kv_backend(), m.kv_dtype()),
        vocab(m.config().vocab_size) {}

  std::int64_t blocks_needed(std::int64_t prompt, const GenerationConfig& c) const {
    const std::int64_t bs = pool.block_size();
    const std::int64_t width = std::max(c.num_beams, c.num_return_sequences);
    const std::int64_t per_seq = (prompt + c.max_new_tokens + bs - 1) / bs;
    // Forks copy one partial block per sequence while the parents still hold theirs.
    return width * per_seq + width;
  }

  // --- scheduler (engine.cpp): admission, reservations, batch building, forward,
  // failure, shutdown. It reaches output processing only through the next group.
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
  // A preempted request cancelled while it waited: finished with what it has.
  void finish_preempted(Group& g);

  // --- output processing, called by the scheduler (engine_output.cpp).
  // Consumes the forward pass's rows ([entries.size()][vocab]): advances prefill,
  // samples, steps beam searches, streams tokens, finishes sequences.
  void process_rows(const std::vector<BatchEntry>& entries, const float* logits);
  // Finishes every live sequence of a cancelled request with what it has.
  void cancel_group(Group& g);
  // Delivers the result (observers first) once every sequence has finished.
  void maybe_complete(Group& g);
  // Fails the request with `e` (observers first) and releases its blocks.
  void fail_group(Group& g, const Error& e);
  // The result of a request as it stands (sequences moved out of the group).
  GenerationResult build_result(Group& g);

  // --- output internals (engine_output.cpp only).
  void prefill_done(Group& g, const float* row);
  // Constrained decoding (engine_structured.cpp): compiles the request's response format
  // and starts each sample's automaton; the mask of a sample's next token (stop tokens
  // only where the value may end); advancing by the chosen token (true: complete).
  void start_structure(Group& g);
  const std::vector<std::uint8_t>* token_mask(const Group& g, const SeqState& s);
  bool advance_structure(const Group& g, SeqState& s, std::int32_t token);
  // A teacher-forced chunk (EngineRequest::score_row): hands its rows to the callback.
  void score_chunk(Group& g, const BatchEntry& be, const float* rows);
  void sample_step(Group& g, SeqState& s, const float* row);
  // Speculative decoding (engine_speculative.cpp): the drafts of a sample's next decode
  // step (into s.draft, at most `budget`; their count), and the verification of a step that fed
  // them: the token chosen at each row exactly as sample_step chooses it, drafts kept while they
  // equal it.
  std::int32_t plan_draft(const Group& g, SeqState& s, std::int64_t budget);
  void verify_drafts(Group& g, SeqState& s, const float* rows);
  void adapt_draft_length(const GenerationConfig& c, SeqState& s, std::int64_t drafted_here,
                          std::int64_t accepted_here);
  void beam_step(Group& g, const std::vector<std::size_t>& seqs,
                 const std::vector<const float*>& rows);
  void beam_finish(Group& g);
  void append_token(Group& g, SeqState& s, std::int32_t token, const StepLogprobs* lp,
                    std::uint64_t digest, const float* row, bool complete = false);
  void finish_seq(Group& g, SeqState& s, FinishReason reason);
  void publish_generated(const Group& g, const SeqState& s);
  void release_group(Group& g);
  void emit(Group& g, const TokenEvent& ev);
};

}  // namespace detinfer::engine
