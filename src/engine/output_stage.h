// The engine's output stage: what happens to a forward pass's logits rows. The scheduler
// (engine_impl.h, engine.cpp) decides which sequences run and computes their rows; it hands
// the rows here and learns the outcome only through the groups' state (finished
// sequences, `done`) and one callback, `on_release`. This stage chooses tokens (sampling,
// constrained decoding's masks, speculative verification, beam search), detokenizes,
// matches stop strings, streams events, publishes generated blocks to the prefix cache,
// and builds and delivers results and failures. Scheduler thread only.
//
// Data flows one way: scheduler -> output stage -> the request's promise and observers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "decode/sampler.h"
#include "decode/sampling_workspace.h"
#include "decode/token_trie.h"
#include "engine/engine_state.h"
#include "model/model.h"

namespace detinfer::engine {

class OutputStage {
 public:
  // What the stage reads and writes beyond the groups it is handed. The references must
  // outlive the stage; `observers` and `prefix` may change between steps (not during one).
  struct Context {
    const Tokenizer* tokenizer;  // null: token ids only (no text, stops or structure)
    std::int64_t vocab;          // logits row length
    model::KvCachePool& pool;
    const std::vector<std::shared_ptr<EngineObserver>>& observers;
    const std::shared_ptr<PrefixProvider>& prefix;  // null: no prefix cache
    model::Model& model;  // its host threads run EngineRequest::score_prepare
  };
  // Called when a group gives its blocks back (finished, failed), after its blocks are
  // released and `done` is set and before its result is delivered: the scheduler's
  // accounting (reservations, running counts, gauges).
  using ReleaseHook = std::function<void(Group&)>;

  OutputStage(Context ctx, ReleaseHook on_release);

  // Consumes one step's rows ([sum of entries' rows][vocab], in entry order): advances
  // prefill, samples, verifies drafts, steps beam searches, streams tokens, finishes
  // sequences. A request whose processing throws an Error fails alone.
  void process_rows(const std::vector<BatchEntry>& entries, const float* logits);
  // Finishes every live sequence of a cancelled request with what it has.
  void cancel_group(Group& g);
  // Delivers the result (observers first) once every sequence has finished.
  void maybe_complete(Group& g);
  // Fails the request with `e` (observers first) and releases its blocks.
  void fail_group(Group& g, const Error& e);
  // The result of a request as it stands (sequences moved out of the group).
  GenerationResult build_result(Group& g);
  // Keeps a failed request's promise until the stage is destroyed: the exception's
  // reference count lives in (uninstrumented) libstdc++, so dropping the last reference on
  // this thread while the caller still reads the Error looks like a race to TSAN.
  void keep_failed(std::promise<GenerationResult> p) { failed_promises_.push_back(std::move(p)); }

  // Speculative decoding (output_speculative.cpp): the drafts of a sample's next decode step
  // (into s.draft, at most `budget`; their count), planned by the scheduler while it builds
  // the batch; their verification happens in process_rows.
  std::int32_t plan_draft(const Group& g, SeqState& s, std::int64_t budget) const;
  // Drafted and accepted tokens since the last call (the scheduler counts them per step).
  using DraftCounts = std::array<DraftTally, kDrafterCount>;  // indexed by Drafter
  DraftCounts take_draft_counts();

 private:
  void prefill_done(Group& g, const float* row);
  // A teacher-forced chunk (EngineRequest::score_row): hands its rows to the callback.
  void score_chunk(Group& g, const BatchEntry& be, const float* rows);
  // A decode row's choice and digest, computed ahead (prepare_choices) or not (ready false).
  struct Prepared {
    bool ready = false;
    decode::TokenChoice choice;
    std::uint64_t digest = 0;
  };
  // The step's plain decode rows (no beam, no drafts, no JSON mask: nothing another row
  // of the step changes is read) get their choice and digest on the model's host threads
  // before the rows are processed in order; with fewer than two threads or rows, none.
  void prepare_choices(const std::vector<BatchEntry>& entries, const float* logits);
  void prepare_one(const BatchEntry& be, const float* row, decode::SamplingWorkspace& ws,
                   Prepared& p) noexcept;
  void sample_step(Group& g, SeqState& s, const float* row, const Prepared* p = nullptr);
  void append_token(Group& g, SeqState& s, std::int32_t token, const StepLogprobs* lp,
                    std::uint64_t digest, const float* row, bool complete = false);
  void finish_seq(Group& g, SeqState& s, FinishReason reason);
  void publish_generated(const Group& g, const SeqState& s);
  void release_group(Group& g);
  void emit(Group& g, const TokenEvent& ev);
  void beam_step(Group& g, const std::vector<std::size_t>& seqs,
                 const std::vector<const float*>& rows);
  void beam_finish(Group& g);

  // Constrained decoding (output_structured.cpp): compiles the request's response format
  // and starts each sample's automaton; the mask of a sample's next token (stop tokens
  // only where the value may end); advancing by the chosen token (true: complete).
  void start_structure(Group& g);
  const std::vector<std::uint8_t>* token_mask(const Group& g, const SeqState& s);
  bool advance_structure(const Group& g, SeqState& s, std::int32_t token);

  // Speculative decoding (output_speculative.cpp): the token chosen at each row exactly as
  // sample_step chooses it, drafts kept while they equal it.
  void verify_drafts(Group& g, SeqState& s, const float* rows);

  Context ctx_;
  ReleaseHook on_release_;
  // Constrained decoding: the vocabulary's token texts, built at the first request with a
  // response_format, and the mask of the sequence being sampled.
  std::unique_ptr<decode::TokenTrie> trie_;
  std::vector<std::uint8_t> allowed_;
  // The token choice's buffers (candidates, probabilities, the descending walk), reused
  // by every sequence of every step instead of ~10 vocabulary-sized allocations per token
  // (issue 33, item 5).
  decode::SamplingWorkspace sampling_;
  // prepare_choices: by entry of the step being processed; the rows to prepare (entry,
  // row); one workspace per lane of host threads.
  std::vector<Prepared> prepared_;
  std::vector<std::pair<std::size_t, const float*>> prepare_rows_;
  std::vector<decode::SamplingWorkspace> lane_sampling_;
  DraftCounts drafts_;
  std::vector<std::promise<GenerationResult>> failed_promises_;
};

}  // namespace detinfer::engine
