// Sliding windows and the KV cache (docs/session.md, "Sliding windows and the KV cache").
//
// When every layer of a model attends through a sliding window of W keys
// (Model::kv_horizon), a row at position p sees no key below p + 1 - W. Before each step,
// every decoding or recomputing sequence releases the blocks wholly before
// next_position + 1 - W (model::first_live_block); their table entries become -1 (holes)
// and the kernels never read them. A prompt keeps all of its blocks while it is prefilled
// (they are published to the prefix cache once it is in); its dead ones go at the first
// decode step. Outputs do not change: a row's logits depend only on the keys it sees.
//
// A sequence then holds at most window_blocks() blocks during decode and recomputation,
// whatever its length, and Engine::blocks_needed (what submit() checks against the pool,
// and a beam search's reservation) counts that bound instead of prompt + max_new_tokens.
#include "engine/engine_impl.h"

namespace detinfer::engine {

namespace {

std::int64_t blocks_for(std::int64_t tokens, std::int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

}  // namespace

std::int64_t Engine::Impl::recompute_chunk() const {
  const std::int64_t chunk = std::max<std::int64_t>(1, options.prefill_chunk_tokens);
  return horizon > 0 ? std::min(chunk, horizon) : chunk;
}

std::int64_t Engine::Impl::window_blocks() const {
  // A step of n tokens from position a reads blocks first_live_block(a) through
  // (a + n - 1) / bs: at most blocks_for(n + W - 2) + 1 of them. Decode steps carry one
  // token (drafts take only spare blocks), recompute chunks at most recompute_chunk().
  return blocks_for(recompute_chunk() + horizon - 2, pool.block_size()) + 1;
}

std::int64_t Engine::Impl::sequence_blocks(std::int64_t prompt, std::int64_t total) const {
  const std::int64_t bs = pool.block_size();
  const std::int64_t all = blocks_for(total, bs);
  if (horizon <= 0) return all;
  return std::min(all, std::max(blocks_for(prompt, bs), window_blocks()));
}

void Engine::Impl::release_dead_blocks() {
  if (horizon <= 0) return;
  const std::int64_t bs = pool.block_size();
  for (auto& g : running) {
    if (g->done || g->prefilling) continue;
    for (SeqState& s : g->seqs) {
      if (s.finished) continue;
      release_before(pool, s.blocks, model::first_live_block(horizon, s.num_computed, bs));
    }
  }
}

}  // namespace detinfer::engine
