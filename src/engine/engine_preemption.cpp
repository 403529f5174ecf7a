// KV admission by blocks in use, with deterministic preemption (docs/session.md, "KV
// admission and preemption").
//
// A request is admitted when the blocks of its prompt (or, for a preempted request, of its
// recomputation) plus a headroom of one block per running sequence fit the free blocks
// that are not promised to anyone; it is not charged for max_new_tokens up front. Blocks a
// running request will still allocate for its (re)prefill are promised to it ("owed"), so
// a prefill never runs out. Decode grows sequences one block at a time from the rest; when
// the next step's tokens do not fit, the youngest preemptible request (the highest
// admission number, Group::order) is preempted: its blocks are released, it goes back to
// the front of the queue and, once admitted again, recomputes its prompt and generated
// tokens by prefill (with a prefix cache, its full blocks are published when it is
// preempted and restored when it resumes, so only the rest is recomputed). Its state (generated
// tokens, output, stream decoder, stop strings, grammar, draft length) is kept, the last recomputed
// token's logits row is exactly the row the decode step would have computed (chunking invariance,
// docs/numerics.md), and the next token is drawn with the same Philox (seed, sample, step): the
// output is bitwise that of an uninterrupted run, and no token is streamed twice.
//
// Beam searches hold their worst case (Engine::blocks_needed) from admission and
// teacher-forced scoring requests their prompt; neither is ever preempted (a restarted beam
// search would show its logits observers the same steps twice; scoring hands each row to a
// callback once).
#include "engine/engine_impl.h"

namespace detinfer::engine {

namespace {

std::int64_t blocks_for(std::int64_t tokens, std::int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

bool is_beam(const Group& g) { return g.req.config.num_beams > 1; }

bool preemptible(const Group& g) { return !is_beam(g) && !g.req.score_row; }

// Blocks a request holds, shared ones (forked beams) counted once.
std::int64_t distinct_blocks(const Group& g) {
  std::vector<std::int32_t> all;
  for (const SeqState& s : g.seqs) {
    for (const std::int32_t b : s.blocks) {
      if (b >= 0) all.push_back(b);  // holes (a sliding window's released blocks) hold none
    }
  }
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin();
}

}  // namespace

std::int64_t Engine::Impl::admission_blocks(const Group& g) const {
  const std::int64_t bs = pool.block_size();
  const auto prompt = static_cast<std::int64_t>(g.req.prompt.size());
  if (is_beam(g)) return blocks_needed(prompt, g.req.config);
  // Its prompt, and the partial last block each of n samples copies when they fork.
  if (g.seqs.empty()) return blocks_for(prompt, bs) + (g.width - 1);
  std::int64_t n = 0;  // a preempted request: every live sample's prompt + generated tokens
  for (const SeqState& s : g.seqs) {
    if (!s.finished)
      n += sequence_blocks(prompt, prompt + static_cast<std::int64_t>(s.generated.size()));
  }
  return n;
}

std::int64_t Engine::Impl::owed_blocks(const Group& g) const {
  if (g.done) return 0;
  const std::int64_t bs = pool.block_size();
  const auto prompt = static_cast<std::int64_t>(g.req.prompt.size());
  if (is_beam(g)) return std::max<std::int64_t>(0, g.reserve - distinct_blocks(g));
  if (g.prefilling) {
    const auto held = static_cast<std::int64_t>(g.seqs.empty() ? 0 : g.seqs[0].blocks.size());
    return std::max<std::int64_t>(0, blocks_for(prompt, bs) - held) + (g.width - 1);
  }
  std::int64_t n = 0;
  for (const SeqState& s : g.seqs) {
    if (!recomputing(g, s)) continue;
    const std::int64_t total = prompt + static_cast<std::int64_t>(s.generated.size());
    std::int64_t rest = blocks_for(total, bs) - static_cast<std::int64_t>(s.blocks.size());
    // A sliding window releases blocks as it goes: it never holds more than the bound.
    if (horizon > 0) rest = std::min(rest, window_blocks() - live_blocks(s.blocks));
    n += std::max<std::int64_t>(0, rest);
  }
  return n;
}

std::int64_t Engine::Impl::growth_blocks() const {
  std::int64_t owed = 0;
  for (const auto& g : running) owed += owed_blocks(*g);
  return pool.free_blocks() - owed;
}

void Engine::Impl::admit_from_queue(std::vector<std::unique_ptr<Group>>& admitted,
                                    std::vector<std::unique_ptr<Group>>& cancelled) {
  std::int64_t growth = growth_blocks();
  // In arrival order (a preempted request is back at the front); a request that does not
  // fit waits and nothing overtakes it, so a large request cannot starve.
  while (!queue.empty()) {
    Group& g = *queue.front();
    if (g.cancelled()) {  // its flag was set directly (no canceller)
      cancelled.push_back(std::move(queue.front()));
      queue.pop_front();
      continue;
    }
    const bool fits_batch = running_seqs == 0 || running_seqs + g.width <= options.max_batch;
    const std::int64_t need = admission_blocks(g);
    // Headroom: one block for every sequence running after this admission, so that the
    // next decode steps do not at once preempt what was just admitted. Alone, a request
    // always fits: submit() refused any whose worst case exceeds the pool.
    const bool alone = running.empty() && admitted.empty();
    const bool fits_kv = alone || need + running_seqs + g.width <= growth;
    if (!fits_batch || !fits_kv) break;
    growth -= need;
    g.reserve = need;
    reserved += need;
    running_seqs += g.width;
    admitted.push_back(std::move(queue.front()));
    queue.pop_front();
  }
}

std::int64_t Engine::Impl::make_room() {
  const std::int64_t bs = pool.block_size();
  std::int64_t committed = 0;  // blocks the older requests' next tokens take
  for (std::size_t i = 0; i < running.size(); ++i) {
    Group& g = *running[i];
    if (g.done || g.prefilling || !preemptible(g)) continue;  // the others' blocks are owed
    std::int64_t need = 0;
    for (const SeqState& s : g.seqs) {
      if (s.finished || recomputing(g, s)) continue;
      need += std::max<std::int64_t>(
          0, blocks_for(s.num_computed + 1, bs) - static_cast<std::int64_t>(s.blocks.size()));
    }
    bool self = false;
    while (!self && need > growth_blocks() - committed) {
      // The victim: the live preemptible request admitted last. It is g or a younger one
      // (g is preemptible), so the older requests' blocks counted in `committed` stay.
      std::size_t v = running.size();
      while (v-- > i) {
        if (!running[v]->done && preemptible(*running[v])) break;
      }
      self = v == i;
      preempt(v);
    }
    // Preempting g preempted every younger preemptible request before it: none is left.
    if (self) break;
    committed += need;
  }
  return growth_blocks() - committed;
}

void Engine::Impl::preempt(std::size_t running_index) {
  std::unique_ptr<Group> gp = std::move(running[running_index]);
  running.erase(running.begin() + static_cast<std::ptrdiff_t>(running_index));
  Group& g = *gp;
  for (SeqState& s : g.seqs) {
    if (prefix && !s.blocks.empty()) publish_computed(g, s);
    release_blocks(pool, s.blocks);
    s.num_computed = 0;
    s.draft.clear();
  }
  if (g.prefilling) {  // nothing generated yet: it starts again from its prompt
    g.seqs.clear();
    g.prefilled = 0;
    g.cached_tokens = 0;
  }
  running_groups.fetch_sub(1);
  preemptions.fetch_add(1);
  for (auto& o : observers) o->on_preempted(g.req);
  std::lock_guard<std::mutex> lk(mu);
  reserved -= g.reserve;
  g.reserve = 0;
  running_seqs -= g.width;
  queue.push_front(std::move(gp));  // preempted in youngest-first order: oldest ends first
}

// The first `count` tokens of a sample: its prompt, then its generated tokens.
static std::vector<std::int32_t> sequence_tokens(const Group& g, const SeqState& s,
                                                 std::int64_t count) {
  std::vector<std::int32_t> tokens = g.req.prompt;
  tokens.insert(tokens.end(), s.generated.begin(), s.generated.end());
  tokens.resize(static_cast<std::size_t>(count));
  return tokens;
}

void Engine::Impl::publish_computed(const Group& g, const SeqState& s) {
  if (s.num_computed < pool.block_size()) return;  // no full block
  try {
    prefix->publish_sequence(g.req, sequence_tokens(g, s, s.num_computed), pool, s.blocks);
  } catch (const std::exception& e) {
    logger().warn("prefix cache publish of a preempted sequence failed: {}", e.what());
  }
}

void Engine::Impl::restore_computed(const Group& g, SeqState& s) {
  const auto total = static_cast<std::int64_t>(g.req.prompt.size() + s.generated.size());
  // A windowed sequence longer than its bound is recomputed from its start, within the
  // bound, rather than restored (which would take all of its blocks at once).
  if (horizon > 0 && blocks_for(total, pool.block_size()) > window_blocks()) return;
  try {
    s.num_computed = prefix->restore_sequence(g.req, sequence_tokens(g, s, total), pool, s.blocks);
    DETINFER_INTERNAL_CHECK(s.num_computed >= 0 && s.num_computed < total &&
                            s.num_computed % pool.block_size() == 0);
  } catch (const std::exception& e) {
    logger().warn("prefix cache restore of a preempted sequence failed, recomputing: {}", e.what());
    release_blocks(pool, s.blocks);
    s.num_computed = 0;
  }
}

void Engine::Impl::add_recompute_chunks(Batch& b, std::int64_t& budget) {
  // A chunk that reaches a sequence's last token is a decode entry (its row samples the
  // next token); the others go after every processed entry (nothing reads their rows).
  std::vector<model::SequenceStep> tail_steps;
  std::vector<BatchEntry> tail_entries;
  for (auto& gp : running) {
    Group& g = *gp;
    if (g.done || g.prefilling) continue;
    const auto prompt = static_cast<std::int64_t>(g.req.prompt.size());
    for (std::size_t i = 0; i < g.seqs.size() && budget > 0; ++i) {
      SeqState& s = g.seqs[i];
      if (!recomputing(g, s)) continue;
      const std::int64_t total = prompt + static_cast<std::int64_t>(s.generated.size());
      const std::int64_t n = std::min({budget, total - s.num_computed, recompute_chunk()});
      ensure_blocks(pool, s.blocks, s.num_computed + n);
      model::SequenceStep st;
      st.start_pos = s.num_computed;
      for (std::int64_t p = s.num_computed; p < s.num_computed + n; ++p) {
        st.tokens.push_back(p < prompt ? g.req.prompt[static_cast<std::size_t>(p)]
                                       : s.generated[static_cast<std::size_t>(p - prompt)]);
      }
      st.block_table = s.blocks;
      budget -= n;
      ++b.stats.prefill_sequences;
      b.stats.prefill_tokens += n;
      if (s.num_computed + n == total) {
        b.steps.push_back(std::move(st));
        b.entries.push_back({&g, i, 1, false, 1});
        b.advance.emplace_back(&s, n - 1);
      } else {
        tail_steps.push_back(std::move(st));
        tail_entries.push_back({&g, i, n, true, 1});
        b.advance.emplace_back(&s, n);
      }
    }
  }
  b.processed = b.entries.size();
  for (auto& st : tail_steps) b.steps.push_back(std::move(st));
  b.entries.insert(b.entries.end(), tail_entries.begin(), tail_entries.end());
}

void Engine::Impl::finish_preempted(Group& g) {
  output.cancel_group(g);  // it holds no blocks; its live samples end with what they have
  GenerationResult r = output.build_result(g);
  for (auto& o : observers) o->on_finished(g.req, r);
  g.done = true;
  g.promise.set_value(std::move(r));
}

}  // namespace detinfer::engine
