#include "engine/engine.h"

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
#include "detinfer/fingerprint.h"
#include "engine/block_table.h"
#include "model/model.h"

namespace detinfer {

namespace {

double ms_between(EngineClock::time_point a, EngineClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One KV sequence: a sample, a live beam, or the prompt while it is prefilled.
struct SeqState {
  std::int32_t sample_index = 0;
  std::vector<std::int32_t> blocks;
  std::int64_t num_computed = 0;  // tokens whose K/V are in `blocks`
  std::int32_t pending = -1;      // chosen token whose K/V is not computed yet
  std::vector<std::int32_t> generated;
  Sequence out;
  std::optional<Tokenizer::StreamDecoder> decoder;
  std::optional<decode::StopMatcher> stops;
  bool finished = false;
  EngineClock::time_point last_token;
};

// One request from admission to its result.
struct Group {
  EngineRequest req;
  std::promise<GenerationResult> promise;
  std::int64_t reserve = 0;  // KV blocks reserved
  std::int32_t width = 1;    // sequences it runs
  bool prefilling = true;
  std::int64_t prefilled = 0;  // prompt tokens with K/V
  std::int64_t cached_tokens = 0;
  std::vector<SeqState> seqs;  // one while prefilling
  std::unique_ptr<decode::BeamSearch> beam;
  std::vector<Sequence> beam_results;
  EngineClock::time_point admitted;
  std::optional<EngineClock::time_point> first_token;
  EngineClock::time_point last_token;  // of sample 0 / of the beam search
  std::vector<double> token_ms;
  bool cancelled_in_queue = false;  // decided once, under the engine mutex
  bool done = false;

  bool cancelled() const { return req.cancelled->load(std::memory_order_relaxed); }
};

// What one sequence contributed to the batch.
struct BatchEntry {
  Group* group;
  std::size_t seq;      // index in group->seqs
  std::int64_t tokens;  // new tokens fed
  bool prefill;
};

}  // namespace

struct Engine::Impl {
  Model& model;
  const Tokenizer* tokenizer;
  EngineOptions options;
  KvCachePool pool;
  std::int64_t vocab;
  std::vector<std::shared_ptr<EngineObserver>> observers;
  std::shared_ptr<PrefixProvider> prefix;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Group>> queue;  // guarded by mu
  bool stopping = false;                     // guarded by mu
  std::int64_t reserved = 0;                 // guarded by mu
  std::int64_t running_seqs = 0;             // guarded by mu
  std::atomic<std::int64_t> running_groups{0};
  std::atomic<std::int64_t> blocks_in_use{0};
  std::atomic<std::int64_t> steps{0};

  std::vector<std::unique_ptr<Group>> running;  // scheduler thread only
  // Promises of failed requests, kept until the engine is destroyed: the exception's
  // reference count lives in (uninstrumented) libstdc++, so dropping the last reference on
  // this thread while the caller still reads the Error looks like a race to TSAN.
  std::vector<std::promise<GenerationResult>> failed_promises;
  std::thread thread;
  std::once_flag shutdown_once;

  Impl(Model& m, const Tokenizer* t, const EngineOptions& o)
      : model(m),
        tokenizer(t),
        options(o),
        pool(m.config(), o.kv_block_size, o.kv_budget_bytes, m.kv_backend()),
        vocab(m.config().vocab_size) {}

  std::int64_t blocks_needed(std::int64_t prompt, const GenerationConfig& c) const {
    const std::int64_t bs = pool.block_size();
    const std::int64_t width = std::max(c.num_beams, c.num_return_sequences);
    const std::int64_t per_seq = (prompt + c.max_new_tokens + bs - 1) / bs;
    // Forks copy one partial block per sequence while the parents still hold theirs.
    return width * per_seq + width;
  }

  void loop();
  void step();
  void admit(std::vector<std::unique_ptr<Group>>& admitted);
  void prefill_done(Group& g, const float* row);
  void sample_step(Group& g, SeqState& s, const float* row);
  void beam_step(Group& g, const std::vector<std::size_t>& seqs,
                 const std::vector<const float*>& rows);
  void append_token(Group& g, SeqState& s, std::int32_t token, const StepLogprobs* lp,
                    std::uint64_t digest, const float* row);
  void finish_seq(Group& g, SeqState& s, FinishReason reason);
  void maybe_complete(Group& g);
  void fail_group(Group& g, const Error& e);
  void release_group(Group& g);
  void emit(Group& g, const TokenEvent& ev);
  GenerationResult build_result(Group& g);
  void cancel_group(Group& g);
};

Engine::Engine(Model& model, const Tokenizer* tokenizer, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(model, tokenizer, options)) {
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

std::future<GenerationResult> Engine::submit(EngineRequest request) {
  if (!request.config.stop_token_ids) {
    request.config.stop_token_ids = impl_->model.config().eos_token_ids;
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
      std::lock_guard<std::mutex> lk(impl_->mu);
      impl_->stopping = true;
    }
    impl_->cv.notify_all();
    if (impl_->thread.joinable()) impl_->thread.join();
    const Error closed(ErrorCode::kUnavailable,
                       "the session was closed before the request finished");
    for (auto& g : impl_->running) impl_->fail_group(*g, closed);
    impl_->running.clear();
    std::deque<std::unique_ptr<Group>> queued;
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      queued.swap(impl_->queue);
    }
    for (auto& g : queued) {
      g->promise.set_exception(std::make_exception_ptr(closed));
      impl_->failed_promises.push_back(std::move(g->promise));
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
  return s;
}

// --- scheduler -----------------------------------------------------------------------

void Engine::Impl::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Group>> admitted;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return stopping || !queue.empty() || !running.empty(); });
      if (stopping) return;
      // Admission in arrival order; a request that does not fit waits (no overtaking,
      // so a large request cannot starve).
      while (!queue.empty()) {
        Group& g = *queue.front();
        g.cancelled_in_queue = g.cancelled();
        const bool fits_batch = running_seqs == 0 || running_seqs + g.width <= options.max_batch;
        if (!g.cancelled_in_queue && (!fits_batch || reserved + g.reserve > pool.capacity())) {
          break;
        }
        if (!g.cancelled_in_queue) {
          reserved += g.reserve;
          running_seqs += g.width;
        }
        admitted.push_back(std::move(queue.front()));
        queue.pop_front();
      }
    }
    admit(admitted);
    try {
      step();
    } catch (const Error& e) {
      // A failed forward pass fails every request in it; the engine keeps serving.
      logger().error("engine step failed: {}", e.what());
      for (auto& g : running) fail_group(*g, e);
    } catch (const std::exception& e) {
      logger().error("engine step failed: {}", e.what());
      for (auto& g : running) fail_group(*g, Error(ErrorCode::kInternal, e.what()));
    }
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [](const std::unique_ptr<Group>& g) { return g->done; }),
                  running.end());
    running_groups.store(static_cast<std::int64_t>(running.size()));
    blocks_in_use.store(pool.capacity() - pool.free_blocks());
  }
}

void Engine::Impl::admit(std::vector<std::unique_ptr<Group>>& admitted) {
  for (auto& gp : admitted) {
    Group& g = *gp;
    g.admitted = EngineClock::now();
    g.last_token = g.req.submitted;
    if (g.cancelled_in_queue) {
      // Cancelled while queued: an empty, cancelled result (nothing was reserved).
      g.reserve = 0;
      g.width = 0;
      g.done = true;
      GenerationResult r = build_result(g);
      Sequence s;
      s.finish_reason = FinishReason::kCancelled;
      r.sequences.push_back(s);
      g.promise.set_value(std::move(r));
      continue;
    }
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
    running.push_back(std::move(gp));
  }
}

void Engine::Impl::step() {
  for (auto& g : running) {
    if (!g->done && g->cancelled()) {
      cancel_group(*g);
      maybe_complete(*g);
    }
  }
  std::vector<SequenceStep> batch;
  std::vector<BatchEntry> entries;
  StepStats stats;
  // Decode: one token for every running sequence.
  for (auto& gp : running) {
    Group& g = *gp;
    if (g.done || g.prefilling) continue;
    for (std::size_t i = 0; i < g.seqs.size(); ++i) {
      SeqState& s = g.seqs[i];
      if (s.finished) continue;
      ensure_blocks(pool, s.blocks, s.num_computed + 1);
      batch.push_back({{s.pending}, s.num_computed, s.blocks, false});
      entries.push_back({&g, i, 1, false});
      ++stats.decode_sequences;
    }
  }
  // Prefill: prompt chunks in admission order within the token budget.
  std::int64_t budget = options.prefill_chunk_tokens;
  for (auto& gp : running) {
    Group& g = *gp;
    if (g.done || !g.prefilling || budget <= 0) continue;
    const std::int64_t total = static_cast<std::int64_t>(g.req.prompt.size());
    const std::int64_t n = std::min(budget, total - g.prefilled);
    SeqState& s = g.seqs[0];
    ensure_blocks(pool, s.blocks, g.prefilled + n);
    SequenceStep st;
    st.tokens.assign(g.req.prompt.begin() + g.prefilled, g.req.prompt.begin() + g.prefilled + n);
    st.start_pos = g.prefilled;
    st.block_table = s.blocks;
    batch.push_back(std::move(st));
    entries.push_back({&g, 0, n, true});
    budget -= n;
    ++stats.prefill_sequences;
    stats.prefill_tokens += n;
  }
  if (batch.empty()) return;
  std::vector<float> logits;
  model.forward(batch, pool, logits);
  steps.fetch_add(1);
  DETINFER_INTERNAL_CHECK(static_cast<std::int64_t>(logits.size()) ==
                          static_cast<std::int64_t>(entries.size()) * vocab);

  // Beam groups need all their rows at once; everything else is handled per row.
  std::vector<std::pair<Group*, std::vector<std::size_t>>> beam_seqs;
  std::vector<std::vector<const float*>> beam_rows;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const BatchEntry& be = entries[e];
    Group& g = *be.group;
    const float* row = logits.data() + static_cast<std::int64_t>(e) * vocab;
    if (g.done) continue;
    try {
      SeqState& s = g.seqs[be.seq];
      s.num_computed += be.tokens;
      if (be.prefill) {
        g.prefilled += be.tokens;
        if (g.prefilled == static_cast<std::int64_t>(g.req.prompt.size())) prefill_done(g, row);
      } else if (g.beam) {
        std::size_t k = 0;
        while (k < beam_seqs.size() && beam_seqs[k].first != &g) ++k;
        if (k == beam_seqs.size()) {
          beam_seqs.push_back({&g, {}});
          beam_rows.emplace_back();
        }
        beam_seqs[k].second.push_back(be.seq);
        beam_rows[k].push_back(row);
      } else {
        sample_step(g, s, row);
      }
    } catch (const Error& err) {
      fail_group(g, err);
    }
  }
  for (std::size_t k = 0; k < beam_seqs.size(); ++k) {
    Group& g = *beam_seqs[k].first;
    if (g.done) continue;
    try {
      beam_step(g, beam_seqs[k].second, beam_rows[k]);
    } catch (const Error& err) {
      fail_group(g, err);
    }
  }
  for (auto& g : running) maybe_complete(*g);
  stats.kv_blocks_in_use = pool.capacity() - pool.free_blocks();
  stats.kv_blocks_capacity = pool.capacity();
  {
    std::lock_guard<std::mutex> lk(mu);
    stats.queue_depth = static_cast<std::int64_t>(queue.size());
  }
  for (auto& o : observers) o->on_step(stats);
}

void Engine::Impl::prefill_done(Group& g, const float* row) {
  g.prefilling = false;
  if (prefix) {
    try {
      prefix->publish(g.req, pool, g.seqs[0].blocks);
    } catch (const std::exception& e) {
      logger().warn("prefix cache publish failed: {}", e.what());
    }
  }
  const std::int64_t prompt_len = static_cast<std::int64_t>(g.req.prompt.size());
  if (g.beam) {
    beam_step(g, {0}, {row});
    return;
  }
  // n samples share the prompt's K/V: full blocks by reference, the last one copied.
  const std::int32_t n = g.req.config.num_return_sequences;
  for (std::int32_t i = 1; i < n; ++i) {
    SeqState s;
    s.blocks = fork_blocks(pool, g.seqs[0].blocks, prompt_len);
    s.num_computed = prompt_len;
    g.seqs.push_back(std::move(s));
  }
  for (std::int32_t i = 0; i < n; ++i) {
    SeqState& s = g.seqs[i];
    s.sample_index = i;
    if (tokenizer != nullptr) s.decoder.emplace(tokenizer->stream_decoder(true));
    s.stops.emplace(g.req.config.stop_strings);
    s.last_token = g.req.submitted;
  }
  for (std::int32_t i = 0; i < n; ++i) sample_step(g, g.seqs[i], row);
}

void Engine::Impl::sample_step(Group& g, SeqState& s, const float* row) {
  const auto step = static_cast<std::uint64_t>(s.generated.size());
  const decode::TokenChoice c =
      decode::choose_token(g.req.config, row, vocab, g.req.prompt, s.generated, g.req.seed,
                           static_cast<std::uint32_t>(s.sample_index), step);
  StepLogprobs lp;
  lp.token = c.token;
  lp.logprob = c.logprob;
  lp.top = c.top;
  s.out.score += static_cast<double>(c.logprob);
  append_token(g, s, c.token, g.req.config.logprobs > 0 ? &lp : nullptr,
               logits_digest(row, static_cast<std::size_t>(vocab)), row);
}

void Engine::Impl::append_token(Group& g, SeqState& s, std::int32_t token, const StepLogprobs* lp,
                                std::uint64_t digest, const float* row) {
  const GenerationConfig& c = g.req.config;
  const auto now = EngineClock::now();
  if (!g.first_token) g.first_token = now;
  if (s.sample_index == 0) {  // per-token timings follow sample 0
    g.token_ms.push_back(ms_between(g.last_token, now));
    g.last_token = now;
  }
  const std::int32_t step = static_cast<std::int32_t>(s.generated.size());
  for (auto& o : observers) {
    if (o->wants_logits()) o->on_logits(g.req, s.sample_index, step, row, vocab);
  }
  s.generated.push_back(token);
  s.out.tokens.push_back(token);
  s.out.step_digests.push_back(digest);
  s.out.digest = chain_digest(s.out.digest, digest);
  if (lp != nullptr) s.out.logprobs.push_back(*lp);
  s.last_token = now;

  const auto& stop_ids = *c.stop_token_ids;
  const bool stop_token =
      !c.ignore_eos && std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
  const bool at_length = static_cast<std::int32_t>(s.generated.size()) >= c.max_new_tokens;
  std::string piece;
  if (s.decoder && !stop_token) piece = s.decoder->push(token);
  if (s.decoder && (stop_token || at_length)) piece += s.decoder->flush();
  decode::StopMatcher::Result r = s.stops->push(piece);
  if ((stop_token || at_length) && !r.stopped) r.emit += s.stops->flush();
  s.out.text += r.emit;
  TokenEvent ev;
  ev.token = token;
  ev.text = std::move(r.emit);
  ev.logprobs = lp != nullptr ? &s.out.logprobs.back() : nullptr;
  ev.sample_index = s.sample_index;
  ev.step = step;
  if (stop_token || r.stopped) {
    finish_seq(g, s, FinishReason::kStop);
  } else if (at_length) {
    finish_seq(g, s, FinishReason::kLength);
  } else {
    s.pending = token;
  }
  emit(g, ev);
}

void Engine::Impl::emit(Group& g, const TokenEvent& ev) {
  if (!g.req.on_token || g.done) return;
  bool keep_going = false;
  try {
    keep_going = g.req.on_token(ev);
  } catch (const std::exception& e) {
    logger().warn("token callback of request {} threw, cancelling it: {}", g.req.id, e.what());
  }
  if (!keep_going) g.req.cancelled->store(true);
}

void Engine::Impl::beam_step(Group& g, const std::vector<std::size_t>& seqs,
                             const std::vector<const float*>& rows) {
  std::vector<std::uint64_t> digests;
  for (const float* r : rows) digests.push_back(logits_digest(r, static_cast<std::size_t>(vocab)));
  // The engine batches beams in seqs order; the search indexes live beams in order.
  DETINFER_INTERNAL_CHECK(seqs.size() == g.beam->beams().size());
  if (!observers.empty()) {
    for (std::size_t b = 0; b < rows.size(); ++b) {
      for (auto& o : observers) {
        if (o->wants_logits()) {
          o->on_logits(g.req, static_cast<std::int32_t>(b),
                       static_cast<std::int32_t>(g.beam->length()), rows[b], vocab);
        }
      }
    }
  }
  const std::vector<int> parents = g.beam->step(rows, digests, g.req.prompt);
  const auto now = EngineClock::now();
  if (!g.first_token) g.first_token = now;
  g.token_ms.push_back(ms_between(g.last_token, now));
  g.last_token = now;
  std::vector<SeqState> next;
  if (!g.beam->done() && g.beam->length() < g.req.config.max_new_tokens) {
    for (std::size_t i = 0; i < parents.size(); ++i) {
      const SeqState& parent = g.seqs[seqs[static_cast<std::size_t>(parents[i])]];
      SeqState s;
      s.blocks = fork_blocks(pool, parent.blocks, parent.num_computed);
      s.num_computed = parent.num_computed;
      s.pending = g.beam->beams()[i].tokens.back();
      s.sample_index = static_cast<std::int32_t>(i);
      next.push_back(std::move(s));
    }
  }
  for (SeqState& s : g.seqs) release_blocks(pool, s.blocks);
  g.seqs = std::move(next);
  if (!g.seqs.empty()) return;
  // Finished: the best hypotheses become the result.
  const auto& stop_ids = *g.req.config.stop_token_ids;
  for (decode::BeamSearch::Hypothesis& h : g.beam->finalize()) {
    Sequence out;
    out.tokens = h.beam.tokens;
    out.score = static_cast<double>(h.score);
    out.step_digests = h.beam.step_digests;
    out.digest = chain_digest(out.step_digests);
    if (g.req.config.logprobs > 0) out.logprobs = h.beam.logprobs;
    out.finish_reason = h.eos ? FinishReason::kStop : FinishReason::kLength;
    std::vector<std::int32_t> text_ids = out.tokens;
    if (h.eos && !text_ids.empty() &&
        std::find(stop_ids.begin(), stop_ids.end(), text_ids.back()) != stop_ids.end()) {
      text_ids.pop_back();
    }
    if (tokenizer != nullptr) {
      decode::StopMatcher m(g.req.config.stop_strings);
      decode::StopMatcher::Result r = m.push(tokenizer->decode(text_ids, true));
      out.text = r.emit + m.flush();
      if (r.stopped) out.finish_reason = FinishReason::kStop;
    }
    g.beam_results.push_back(std::move(out));
  }
  for (std::size_t i = 0; i < g.beam_results.size() && !g.done; ++i) {
    const Sequence& out = g.beam_results[i];
    for (std::size_t t = 0; t < out.tokens.size(); ++t) {
      TokenEvent ev;
      ev.token = out.tokens[t];
      if (tokenizer != nullptr && t == 0) ev.text = out.text;  // the whole text at once
      ev.logprobs = t < out.logprobs.size() ? &out.logprobs[t] : nullptr;
      ev.sample_index = static_cast<std::int32_t>(i);
      ev.step = static_cast<std::int32_t>(t);
      emit(g, ev);
    }
  }
}

void Engine::Impl::finish_seq(Group& /*g*/, SeqState& s, FinishReason reason) {
  s.finished = true;
  s.out.finish_reason = reason;
  release_blocks(pool, s.blocks);
}

void Engine::Impl::cancel_group(Group& g) {
  for (SeqState& s : g.seqs) {
    if (!s.finished) {
      if (s.stops && s.decoder) s.out.text += s.stops->push(s.decoder->flush()).emit;
      finish_seq(g, s, FinishReason::kCancelled);
    }
  }
  if (g.beam || g.prefilling) {
    // Nothing to return but what is there: beams report their current best prefix.
    g.seqs.clear();
    Sequence s;
    s.finish_reason = FinishReason::kCancelled;
    if (g.beam && !g.beam->beams().empty()) {
      s.tokens = g.beam->beams()[0].tokens;
      s.step_digests = g.beam->beams()[0].step_digests;
      s.digest = chain_digest(s.step_digests);
    }
    g.beam_results = {s};
    g.beam.reset();
    g.prefilling = false;
  }
}

void Engine::Impl::maybe_complete(Group& g) {
  if (g.done || g.prefilling) return;
  for (const SeqState& s : g.seqs) {
    if (!s.finished) return;
  }
  if (g.beam && !g.beam->done() && g.beam_results.empty()) return;
  GenerationResult r = build_result(g);
  for (auto& o : observers) o->on_finished(g.req, r);
  release_group(g);
  g.promise.set_value(std::move(r));
}

GenerationResult Engine::Impl::build_result(Group& g) {
  GenerationResult r;
  r.prompt_tokens = g.req.prompt;
  r.seed = g.req.seed;
  r.cache.prefix_cached_tokens = g.cached_tokens;
  if (!g.beam_results.empty()) {
    r.sequences = std::move(g.beam_results);
  } else {
    for (SeqState& s : g.seqs) r.sequences.push_back(std::move(s.out));
  }
  const auto now = EngineClock::now();
  r.timings.queue_ms = ms_between(g.req.submitted, g.admitted);
  if (g.first_token) r.timings.time_to_first_token_ms = ms_between(g.req.submitted, *g.first_token);
  r.timings.total_ms = ms_between(g.req.submitted, now);
  r.timings.token_ms = g.token_ms;
  return r;
}

void Engine::Impl::release_group(Group& g) {
  for (SeqState& s : g.seqs) release_blocks(pool, s.blocks);
  // Counted before the result is delivered, so a caller holding every result sees 0.
  blocks_in_use.store(pool.capacity() - pool.free_blocks());
  g.done = true;
  std::lock_guard<std::mutex> lk(mu);
  reserved -= g.reserve;
  running_seqs -= g.width;
}

void Engine::Impl::fail_group(Group& g, const Error& e) {
  if (g.done) return;
  for (auto& o : observers) o->on_failed(g.req, e);
  release_group(g);
  g.promise.set_exception(std::make_exception_ptr(e));
  failed_promises.push_back(std::move(g.promise));
}

}  // namespace detinfer
