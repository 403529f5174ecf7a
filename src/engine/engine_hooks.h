// Seams through which the session attaches the caches, metrics and fingerprint recorder
// to the engine without the engine knowing them. All hooks run on the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/generation.h"

namespace detinfer::model {
class KvCachePool;
}  // namespace detinfer::model

namespace detinfer::engine {
struct EngineRequest;

// What the scheduler did in one step (for metrics).
struct StepStats {
  std::int32_t decode_sequences = 0;  // sequences that decoded one token
  std::int32_t prefill_sequences = 0;
  std::int64_t prefill_tokens = 0;
  std::int64_t queue_depth = 0;
  std::int64_t kv_blocks_in_use = 0;
  std::int64_t kv_blocks_capacity = 0;
};

// The drafter of a speculative request (docs/speculative.md): prompt lookup over n-grams,
// or a hook set on the request (EngineRequest::drafter: the session's draft model).
enum class Drafter : std::uint8_t { kNgram = 0, kModel = 1 };
inline constexpr int kDrafterCount = 2;
const char* to_string(Drafter d);  // "ngram", "model"

// Drafted tokens, and those equal to the token the model chose.
struct DraftTally {
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_step(const StepStats&) {}
  // The queue and the pool changed outside a step (a request finished, failed or was
  // abandoned): queue_depth and kv_blocks_* are set, the sequence counts are 0. Runs
  // before the request's future is ready, so gauges read after it are exact.
  virtual void on_gauges(const StepStats&) {}
  // Speculative decoding (docs/speculative.md): a step's verify passes of `drafter`'s
  // requests drafted `t.drafted` tokens, of which `t.accepted` equalled the token the model
  // chose (called once per drafter that drafted in the step). Runs before the step's
  // finished requests are delivered, so counters read after a result include it.
  virtual void on_drafts(Drafter /*drafter*/, const DraftTally& /*t*/) {}
  // KV admission (docs/session.md, "KV admission and preemption"): a running request was preempted
  // (its KV blocks freed, back at the front of the queue) or a preempted one was admitted again (it
  // resumes by recomputing its prompt and generated tokens). Both run before any result
  // of the step is delivered.
  virtual void on_preempted(const EngineRequest&) {}
  virtual void on_resumed(const EngineRequest&) {}
  // A request cancelled before admission: it ran nothing and its future holds an empty
  // cancelled result. Neither on_finished nor on_failed is called for it.
  virtual void on_abandoned(const EngineRequest&) {}
  // Every generated token's raw logits row (the one its step digest covers), when
  // wants_logits() is true (full-logits fingerprints).
  virtual bool wants_logits() const { return false; }
  virtual void on_logits(const EngineRequest&, std::int32_t /*sample_index*/, std::int32_t /*step*/,
                         const float* /*row*/, std::int64_t /*vocab*/) {}
  // Before the result is handed to the caller; may fill result.fingerprint_json.
  virtual void on_finished(const EngineRequest&, GenerationResult&) {}
  virtual void on_failed(const EngineRequest&, const Error&) {}
};

// The KV-prefix cache seam. restore() runs at admission: it may allocate blocks from the
// pool, fill them with cached KV of the prompt's leading full blocks and append them to
// block_table; it returns the number of prompt tokens covered (a multiple of the block
// size, less than the prompt length). publish() runs once the whole prompt has been
// prefilled, with the blocks that hold it; publish_sequence() when a sample finishes.
class PrefixProvider {
 public:
  virtual ~PrefixProvider() = default;
  virtual std::int64_t restore(const EngineRequest& request, model::KvCachePool& pool,
                               std::vector<std::int32_t>& block_table) = 0;
  virtual void publish(const EngineRequest& request, const model::KvCachePool& pool,
                       const std::vector<std::int32_t>& block_table) = 0;
  // When a sample finishes (multi-turn reuse, docs/chat.md): `tokens` is the prompt plus
  // the generated tokens whose K/V are in block_table, so that the next turn's prompt
  // (this prompt + the reply + a new message) finds them. Decode K/V equals prefill K/V
  // bit for bit, so a hit stays identical to a cold run. A windowed model's table may
  // hold holes (-1: blocks the engine released, engine_window.cpp): they are skipped.
  virtual void publish_sequence(const EngineRequest& /*request*/,
                                const std::vector<std::int32_t>& /*tokens*/,
                                const model::KvCachePool& /*pool*/,
                                const std::vector<std::int32_t>& /*block_table*/) {}
  // When a preempted sequence resumes (docs/session.md, "KV admission and preemption"):
  // restore() for `tokens` (its prompt and generated tokens; the sequence's full blocks
  // were given to publish_sequence() when it was preempted) instead of the prompt. Same
  // contract: a multiple of the block size, less than tokens.size().
  virtual std::int64_t restore_sequence(const EngineRequest& /*request*/,
                                        const std::vector<std::int32_t>& /*tokens*/,
                                        model::KvCachePool& /*pool*/,
                                        std::vector<std::int32_t>& /*block_table*/) {
    return 0;
  }
};

}  // namespace detinfer::engine
