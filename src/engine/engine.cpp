#include <algorithm>

#include "core/huge_pages.h"
#include "engine/engine_impl.h"

namespace detinfer::engine {

const char* to_string(Drafter d) { return d == Drafter::kModel ? "model" : "ngram"; }

Engine::Engine(model::Model& model, const Tokenizer* tokenizer, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(model, tokenizer, options)) {
  impl_->waker->engine = impl_.get();
  impl_->thread = std::thread([this] { impl_->loop(); });
}

Engine::~Engine() { shutdown(); }

void Engine::add_observer(std::shared_ptr<EngineObserver> observer) {
  impl_->observers.push_back(std::move(observer));
}

void Engine::set_prefix_provider(std::shared_ptr<PrefixProvider> provider) {
  impl_->prefix = std::move(provider);
}

std::int64_t Engine::blocks_needed(std::int64_t prompt_tokens,
                                   const GenerationConfig& config) const {
  return impl_->blocks_needed(prompt_tokens, config);
}

std::int64_t Engine::kv_capacity_blocks() const { return impl_->pool.capacity(); }

std::function<void()> Engine::canceller(std::shared_ptr<std::atomic<bool>> flag) const {
  return [flag = std::move(flag), waker = impl_->waker] {
    flag->store(true);
    waker->cancel(flag.get());
  };
}

void engine_internal::Waker::cancel(const std::atomic<bool>* flag) {
  std::lock_guard<std::mutex> lk(mu);
  if (engine == nullptr) return;
  {
    std::lock_guard<std::mutex> elk(engine->mu);
    auto& q = engine->queue;
    const auto it = std::find_if(q.begin(), q.end(), [flag](const std::unique_ptr<Group>& g) {
      return g->req.cancelled.get() == flag;
    });
    if (it != q.end()) {  // its queue slot is free from now on
      engine->abandoned.push_back(std::move(*it));
      q.erase(it);
    }
    engine->cancel_pending = true;
  }
  engine->cv.notify_all();
}

std::future<GenerationResult> Engine::submit(EngineRequest request) {
  if (!request.config.stop_token_ids) {
    request.config.stop_token_ids = impl_->model.config().eos_token_ids;
  }
  if (request.config.draft_tokens > 0 && impl_->model.mode() == NumericsMode::kFast) {
    // Fast mode's logits depend on the rows a pass carries: a verify pass could choose
    // other tokens than plain decoding (docs/speculative.md).
    throw Error(ErrorCode::kInvalidArgument,
                "GenerationConfig.draft_tokens must be 0 in fast numerics mode: speculative "
                "decoding keeps outputs unchanged only where logits do not depend on the rows a "
                "pass carries (canonical, device_invariant)",
                "draft_tokens");
  }
  auto g = std::make_unique<Group>();
  g->reserve =
      impl_->blocks_needed(static_cast<std::int64_t>(request.prompt.size()), request.config);
  g->width = std::max(request.config.num_beams, request.config.num_return_sequences);
  g->req = std::move(request);
  if (g->reserve > impl_->pool.capacity()) {
    // Never fits (unlike a full queue): the field tells servers it is not transient.
    throw Error(ErrorCode::kResourceExhausted,
                str_cat("request needs ", g->reserve, " KV blocks (", g->req.prompt.size(),
                        " prompt tokens + max_new_tokens ", g->req.config.max_new_tokens, ", ",
                        g->width, " sequences) but the KV pool holds ", impl_->pool.capacity(),
                        "; raise SessionOptions.kv_budget_bytes"),
                "max_new_tokens");
  }
  std::future<GenerationResult> f = g->promise.get_future();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->stopping) fail(ErrorCode::kUnavailable, "the session is closed");
    if (static_cast<std::int64_t>(impl_->queue.size()) >= impl_->options.max_queue) {
      fail(ErrorCode::kResourceExhausted, "the request queue is full (", impl_->options.max_queue,
           " waiting; SessionOptions.max_queue); retry later");
    }
    impl_->queue.push_back(std::move(g));
  }
  impl_->cv.notify_one();
  return f;
}

void Engine::shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    {
      std::lock_guard<std::mutex> wk(impl_->waker->mu);  // cancellers stop reaching us
      impl_->waker->engine = nullptr;
    }
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      impl_->stopping = true;
    }
    impl_->cv.notify_all();
    if (impl_->thread.joinable()) impl_->thread.join();
    const Error closed(ErrorCode::kUnavailable,
                       "the session was closed before the request finished");
    for (auto& g : impl_->running) impl_->output.fail_group(*g, closed);
    impl_->running.clear();
    std::deque<std::unique_ptr<Group>> queued;
    std::vector<std::unique_ptr<Group>> cancelled;
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      queued.swap(impl_->queue);
      cancelled.swap(impl_->abandoned);
    }
    impl_->retire_abandoned(cancelled);  // cancelled before the close: as if it had run
    for (auto& g : queued) {
      if (g->order >= 0) {  // preempted: it had run, like the running ones
        for (auto& o : impl_->observers) o->on_failed(g->req, closed);
      }
      g->promise.set_exception(std::make_exception_ptr(closed));
      impl_->output.keep_failed(std::move(g->promise));
    }
  });
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    s.queued = static_cast<std::int64_t>(impl_->queue.size());
  }
  s.running = impl_->running_groups.load();
  s.kv_blocks_in_use = impl_->blocks_in_use.load();
  s.kv_blocks_capacity = impl_->pool.capacity();
  s.steps = impl_->steps.load();
  for (int d = 0; d < kDrafterCount; ++d) {
    s.by_drafter[d] = {impl_->drafted[d].load(), impl_->accepted[d].load()};
    s.draft_tokens += s.by_drafter[d].drafted;
    s.accepted_draft_tokens += s.by_drafter[d].accepted;
  }
  s.preemptions = impl_->preemptions.load();
  s.resumptions = impl_->resumptions.load();
  return s;
}

// --- scheduler -----------------------------------------------------------------------

void Engine::Impl::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Group>> cancelled;
    std::vector<std::unique_ptr<Group>> admitted;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return stopping || cancel_pending || !queue.empty() || !running.empty(); });
      if (stopping) return;
      take_abandoned(cancelled);
      admit_from_queue(admitted, cancelled);
    }
    retire_abandoned(cancelled);
    admit(admitted);
    try {
      step();
    } catch (const Error& e) {
      // A failed forward pass fails every request in it; the engine keeps serving.
      logger().error("engine step failed: {}", e.what());
      for (auto& g : running) output.fail_group(*g, e);
    } catch (const std::exception& e) {
      logger().error("engine step failed: {}", e.what());
      for (auto& g : running) output.fail_group(*g, Error(ErrorCode::kInternal, e.what()));
    }
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [](const std::unique_ptr<Group>& g) { return g->done; }),
                  running.end());
    blocks_in_use.store(pool.capacity() - pool.free_blocks());
  }
}

void Engine::Impl::take_abandoned(std::vector<std::unique_ptr<Group>>& out) {
  cancel_pending = false;
  out = std::move(abandoned);
  abandoned.clear();
}

void Engine::Impl::retire_abandoned(std::vector<std::unique_ptr<Group>>& groups) {
  if (groups.empty()) return;
  publish_gauges();  // they have left the queue and hold nothing
  for (auto& gp : groups) {
    Group& g = *gp;
    if (g.order >= 0) {  // preempted while it waited: it had run
      finish_preempted(g);
      continue;
    }
    g.admitted = EngineClock::now();
    g.done = true;
    for (auto& o : observers) o->on_abandoned(g.req);
    GenerationResult r = output.build_result(g);
    Sequence s;
    s.finish_reason = FinishReason::kCancelled;
    r.sequences.push_back(s);
    g.promise.set_value(std::move(r));
  }
}

void Engine::Impl::admit(std::vector<std::unique_ptr<Group>>& admitted) {
  for (auto& gp : admitted) {
    Group& g = *gp;
    running_groups.fetch_add(1);  // release_group (or preempt) takes it back
    if (g.order >= 0) {           // preempted before: it resumes (engine_preemption.cpp)
      resumptions.fetch_add(1);
      for (auto& o : observers) o->on_resumed(g.req);
    } else {
      g.order = next_order++;
      g.admitted = EngineClock::now();
      g.last_token = g.req.submitted;
    }
    if (g.seqs.empty()) {
      start_prefill(g);
    } else if (prefix) {
      for (SeqState& s : g.seqs) {
        if (!s.finished) restore_computed(g, s);
      }
    }
    // `running` stays in admission order: a resumed request goes back to its place.
    const auto at = std::upper_bound(
        running.begin(), running.end(), g.order,
        [](std::int64_t order, const std::unique_ptr<Group>& r) { return order < r->order; });
    running.insert(at, std::move(gp));
  }
}

void Engine::Impl::start_prefill(Group& g) {
  g.seqs.emplace_back();
  if (prefix) {
    try {
      g.cached_tokens = prefix->restore(g.req, pool, g.seqs[0].blocks);
      DETINFER_INTERNAL_CHECK(g.cached_tokens >= 0 &&
                              g.cached_tokens < static_cast<std::int64_t>(g.req.prompt.size()) &&
                              g.cached_tokens % pool.block_size() == 0);
    } catch (const std::exception& e) {
      logger().warn("prefix cache restore failed, prefilling everything: {}", e.what());
      release_blocks(pool, g.seqs[0].blocks);
      g.cached_tokens = 0;
    }
    g.prefilled = g.seqs[0].num_computed = g.cached_tokens;
  }
  if (g.req.config.num_beams > 1) {
    g.beam =
        std::make_unique<decode::BeamSearch>(g.req.config, *g.req.config.stop_token_ids, vocab);
  }
}

void Engine::Impl::on_released(Group& g) {
  // Counted before the result is delivered, so a caller holding every result sees 0.
  blocks_in_use.store(pool.capacity() - pool.free_blocks());
  running_groups.fetch_sub(1);
  {
    std::lock_guard<std::mutex> lk(mu);
    reserved -= g.reserve;
    running_seqs -= g.width;
  }
  publish_gauges();
}

void Engine::Impl::publish_gauges() {
  if (observers.empty()) return;
  StepStats s;
  s.kv_blocks_in_use = pool.capacity() - pool.free_blocks();
  s.kv_blocks_capacity = pool.capacity();
  {
    std::lock_guard<std::mutex> lk(mu);
    s.queue_depth = static_cast<std::int64_t>(queue.size());
  }
  for (auto& o : observers) o->on_gauges(s);
}

float* engine_internal::StepLogits::append(std::size_t n) {
  if (size + n > capacity) {
    // Exact at a step's first append (one per step for the real models: no slack kept);
    // doubling when a step appends again (a model appending row by row: no quadratic copy).
    const std::size_t want = size == 0 ? n : std::max(size + n, 2 * capacity);
    std::unique_ptr<float[]> grown(new float[want]);             // not value-initialized
    core::advise_huge_pages(grown.get(), want * sizeof(float));  // before first touch
    std::copy(data.get(), data.get() + size, grown.get());
    data = std::move(grown);
    capacity = want;
  }
  float* const out = data.get() + size;
  size += n;
  return out;
}

void Engine::Impl::step() {
  for (auto& g : running) {
    if (!g->done && g->cancelled()) {
      output.cancel_group(*g);
      output.maybe_complete(*g);
    }
  }
  Batch b;
  build_batch(b);
  blocks_in_use.store(pool.capacity() - pool.free_blocks());  // with this step's new blocks
  if (b.steps.empty()) return;
  step_logits.size = 0;  // forward_rows appends; the capacity stays
  model.forward_rows(b.steps, pool, [this](std::size_t n) { return step_logits.append(n); });
  steps.fetch_add(1);
  std::int64_t rows = 0;
  for (const BatchEntry& e : b.entries) rows += e.rows;
  DETINFER_INTERNAL_CHECK(static_cast<std::int64_t>(step_logits.size) == rows * vocab);
  for (const auto& [s, n] : b.advance) s->num_computed += n;  // recomputed K/V
  b.entries.resize(b.processed);
  output.process_rows(b.entries, step_logits.data.get());
  const OutputStage::DraftCounts d = output.take_draft_counts();
  for (int k = 0; k < kDrafterCount; ++k) {
    if (d[k].drafted == 0) continue;  // counted before any result of this step is delivered
    drafted[k].fetch_add(d[k].drafted);
    accepted[k].fetch_add(d[k].accepted);
    for (auto& o : observers) o->on_drafts(static_cast<Drafter>(k), d[k]);
  }
  for (auto& g : running) output.maybe_complete(*g);
  b.stats.kv_blocks_in_use = pool.capacity() - pool.free_blocks();
  b.stats.kv_blocks_capacity = pool.capacity();
  {
    std::lock_guard<std::mutex> lk(mu);
    b.stats.queue_depth = static_cast<std::int64_t>(queue.size());
  }
  for (auto& o : observers) o->on_step(b.stats);
}

void Engine::Impl::build_batch(Batch& b) {
  // Decode: one token for every running sequence, followed by its drafts when it
  // speculates (one row per token fed: the verify pass). Drafts of all sequences together
  // stay within the prefill token budget, which bounds the step's rows and logits, and
  // take only blocks no sequence's next token needs (a draft never preempts).
  release_dead_blocks();  // a sliding window's blocks no row will see again
  std::int64_t spare = make_room();
  const std::int64_t bs = pool.block_size();
  std::int64_t draft_budget = options.prefill_chunk_tokens;
  for (auto& gp : running) {
    Group& g = *gp;
    if (g.done || g.prefilling) continue;
    for (std::size_t i = 0; i < g.seqs.size(); ++i) {
      SeqState& s = g.seqs[i];
      if (s.finished || recomputing(g, s)) continue;
      const std::int64_t base =
          std::max<std::int64_t>(static_cast<std::int64_t>(s.blocks.size()),
                                 (s.num_computed + bs) / bs);  // with the next token's block
      // The drafts that fit the spare blocks, asked for up front: a drafter (the draft
      // model) does not compute drafts that would be cut.
      const std::int64_t fits = std::max<std::int64_t>(0, (base + spare) * bs - s.num_computed - 1);
      const std::int32_t k = output.plan_draft(g, s, std::min(draft_budget, fits));
      if (k > 0) spare -= std::max<std::int64_t>(0, (s.num_computed + k + bs) / bs - base);
      draft_budget -= k;
      ensure_blocks(pool, s.blocks, s.num_computed + 1 + k);
      b.steps.push_back({{s.pending}, s.num_computed, s.blocks, k > 0});
      b.steps.back().tokens.insert(b.steps.back().tokens.end(), s.draft.begin(), s.draft.end());
      b.entries.push_back({&g, i, 1 + k, false, 1 + k});
      ++b.stats.decode_sequences;
    }
  }
  // Prefill: prompt chunks in admission order within the token budget.
  std::int64_t budget = options.prefill_chunk_tokens;
  for (auto& gp : running) {
    Group& g = *gp;
    if (g.done || !g.prefilling || budget <= 0) continue;
    const std::int64_t total = static_cast<std::int64_t>(g.req.prompt.size());
    std::int64_t n = std::min(budget, total - g.prefilled);
    // Teacher forcing: positions before score_from in chunks of their own (one row),
    // every later position's row returned.
    const bool scored = g.req.score_row && g.prefilled >= g.req.score_from;
    if (g.req.score_row && !scored) n = std::min(n, g.req.score_from - g.prefilled);
    SeqState& s = g.seqs[0];
    ensure_blocks(pool, s.blocks, g.prefilled + n);
    model::SequenceStep st;
    st.tokens.assign(g.req.prompt.begin() + g.prefilled, g.req.prompt.begin() + g.prefilled + n);
    st.start_pos = g.prefilled;
    st.block_table = s.blocks;
    st.all_logits = scored;
    b.steps.push_back(std::move(st));
    b.entries.push_back({&g, 0, n, true, scored ? n : 1});
    budget -= n;
    ++b.stats.prefill_sequences;
    b.stats.prefill_tokens += n;
  }
  add_recompute_chunks(b, budget);  // last: it puts the unprocessed chunks at the end
}

}  // namespace detinfer::engine
