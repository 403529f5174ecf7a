// The engine's output stage (output_stage.h): sampling, tokens, stop strings, beam
// search, streamed events, results and their release.
#include "engine/output_stage.h"

#include <algorithm>

#include "core/check.h"
#include "core/log.h"
#include "decode/sampler.h"
#include "detinfer/fingerprint.h"
#include "engine/block_table.h"

namespace detinfer::engine {

OutputStage::OutputStage(Context ctx, ReleaseHook on_release)
    : ctx_(ctx), on_release_(std::move(on_release)) {}

OutputStage::DraftCounts OutputStage::take_draft_counts() {
  const DraftCounts d = drafts_;
  drafts_ = DraftCounts{};
  return d;
}

void OutputStage::process_rows(const std::vector<BatchEntry>& entries, const float* logits) {
  // Beam groups need all their rows at once; everything else is handled per row.
  std::vector<std::pair<Group*, std::vector<std::size_t>>> beam_seqs;
  std::vector<std::vector<const float*>> beam_rows;
  prepare_choices(entries, logits);
  std::int64_t row_index = 0;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const BatchEntry& be = entries[e];
    Group& g = *be.group;
    const float* row = logits + row_index * ctx_.vocab;
    row_index += be.rows;
    if (g.done) continue;
    try {
      if (g.req.score_row) {
        score_chunk(g, be, row);
        continue;
      }
      SeqState& s = g.seqs[be.seq];
      if (!be.prefill && !s.draft.empty()) {
        verify_drafts(g, s, row);
        continue;
      }
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
        sample_step(g, s, row, &prepared_[e]);
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
}

void OutputStage::prepare_choices(const std::vector<BatchEntry>& entries, const float* logits) {
  prepared_.assign(entries.size(), Prepared{});
  prepare_rows_.clear();
  std::int64_t row_index = 0;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const BatchEntry& be = entries[e];
    const Group& g = *be.group;
    const float* row = logits + row_index * ctx_.vocab;
    row_index += be.rows;
    if (g.done || g.req.score_row || be.prefill || g.beam) continue;
    const SeqState& s = g.seqs[be.seq];
    if (s.draft.empty() && !s.json) prepare_rows_.push_back({e, row});
  }
  const auto n = static_cast<std::int64_t>(prepare_rows_.size());
  const std::int64_t lanes = std::min<std::int64_t>(n, ctx_.model.threads());
  if (lanes < 2) return;
  if (static_cast<std::int64_t>(lane_sampling_.size()) < lanes)
    lane_sampling_.resize(static_cast<std::size_t>(lanes));
  // Lane l: rows [l n / lanes, (l + 1) n / lanes) with workspace l; no two lanes share one.
  ctx_.model.host_parallel_for(lanes, [&](std::int64_t l0, std::int64_t l1) {
    for (std::int64_t l = l0; l < l1; ++l) {
      for (std::int64_t i = l * n / lanes; i < (l + 1) * n / lanes; ++i) {
        const auto [e, row] = prepare_rows_[static_cast<std::size_t>(i)];
        prepare_one(entries[e], row, lane_sampling_[static_cast<std::size_t>(l)], prepared_[e]);
      }
    }
  });
}

void OutputStage::prepare_one(const BatchEntry& be, const float* row, decode::SamplingWorkspace& ws,
                              Prepared& p) noexcept {
  const Group& g = *be.group;
  const SeqState& s = g.seqs[be.seq];
  try {
    p.choice = decode::choose_token(g.req.config, row, ctx_.vocab, g.req.prompt, s.generated,
                                    g.req.seed, static_cast<std::uint32_t>(s.sample_index),
                                    static_cast<std::uint64_t>(s.generated.size()), ws, nullptr);
    p.digest = logits_digest(row, static_cast<std::size_t>(ctx_.vocab));
    p.ready = true;
  } catch (...) {  // sample_step computes it again on this thread, where the error surfaces
  }
}

void OutputStage::score_chunk(Group& g, const BatchEntry& be, const float* rows) {
  SeqState& s = g.seqs[0];
  // Row r is the logits of position first + r.
  const std::int64_t first = be.rows == be.tokens ? g.prefilled : g.prefilled + be.tokens - 1;
  const std::int64_t r0 = std::max<std::int64_t>(0, g.req.score_from - first);
  if (g.req.score_prepare && be.rows > r0 && !g.cancelled()) {
    ctx_.model.host_parallel_for(be.rows - r0, [&](std::int64_t i0, std::int64_t i1) {
      const std::int64_t r = r0 + i0;
      g.req.score_prepare(first + r - g.req.score_from, rows + r * ctx_.vocab, i1 - i0);
    });
  }
  for (std::int64_t r = 0; r < be.rows && !g.cancelled(); ++r) {
    const std::int64_t pos = first + r;
    if (pos < g.req.score_from) continue;
    if (!g.req.score_row(pos - g.req.score_from, rows + r * ctx_.vocab))
      g.req.cancelled->store(true);
  }
  s.num_computed += be.tokens;
  g.prefilled += be.tokens;
  if (g.prefilled == static_cast<std::int64_t>(g.req.prompt.size())) {
    g.prefilling = false;
    s.finished = true;
    release_blocks(ctx_.pool, s.blocks);
  }
}

void OutputStage::prefill_done(Group& g, const float* row) {
  g.prefilling = false;
  if (ctx_.prefix) {
    try {
      ctx_.prefix->publish(g.req, ctx_.pool, g.seqs[0].blocks);
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
    s.blocks = fork_blocks(ctx_.pool, g.seqs[0].blocks, prompt_len);
    s.num_computed = prompt_len;
    g.seqs.push_back(std::move(s));
  }
  for (std::int32_t i = 0; i < n; ++i) {
    SeqState& s = g.seqs[i];
    s.sample_index = i;
    if (ctx_.tokenizer != nullptr) s.decoder.emplace(ctx_.tokenizer->stream_decoder(true));
    s.stops.emplace(g.req.config.stop_strings);
    s.last_token = g.req.submitted;
  }
  start_structure(g);
  for (std::int32_t i = 0; i < n; ++i) sample_step(g, g.seqs[i], row);
}

void OutputStage::sample_step(Group& g, SeqState& s, const float* row, const Prepared* p) {
  const auto step = static_cast<std::uint64_t>(s.generated.size());
  const bool ready = p != nullptr && p->ready;
  const decode::TokenChoice c =
      ready ? p->choice
            : decode::choose_token(g.req.config, row, ctx_.vocab, g.req.prompt, s.generated,
                                   g.req.seed, static_cast<std::uint32_t>(s.sample_index), step,
                                   sampling_, token_mask(g, s));
  const bool complete = advance_structure(g, s, c.token);
  StepLogprobs lp;
  lp.token = c.token;
  lp.logprob = c.logprob;
  lp.top = c.top;
  s.out.score += static_cast<double>(c.logprob);
  append_token(g, s, c.token, g.req.config.logprobs > 0 ? &lp : nullptr,
               ready ? p->digest : logits_digest(row, static_cast<std::size_t>(ctx_.vocab)), row,
               complete);
}

void OutputStage::append_token(Group& g, SeqState& s, std::int32_t token, const StepLogprobs* lp,
                               std::uint64_t digest, const float* row, bool complete) {
  const GenerationConfig& c = g.req.config;
  const auto now = EngineClock::now();
  if (!g.first_token) g.first_token = now;
  if (s.sample_index == 0) {  // per-token timings follow sample 0
    g.token_ms.push_back(ms_between(g.last_token, now));
    g.last_token = now;
  }
  const std::int32_t step = static_cast<std::int32_t>(s.generated.size());
  for (auto& o : ctx_.observers) {
    if (o->wants_logits()) o->on_logits(g.req, s.sample_index, step, row, ctx_.vocab);
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
  const bool last = stop_token || at_length || complete;
  std::string piece;
  if (s.decoder && !stop_token) piece = s.decoder->push(token);
  if (s.decoder && last) piece += s.decoder->flush();
  decode::StopMatcher::Result r = s.stops->push(piece);
  if (last && !r.stopped) r.emit += s.stops->flush();
  s.out.text += r.emit;
  TokenEvent ev;
  ev.token = token;
  ev.text = std::move(r.emit);
  ev.logprobs = lp != nullptr ? &s.out.logprobs.back() : nullptr;
  ev.sample_index = s.sample_index;
  ev.step = step;
  if (stop_token || r.stopped || complete) {
    finish_seq(g, s, FinishReason::kStop);
  } else if (at_length) {
    finish_seq(g, s, FinishReason::kLength);
  } else {
    s.pending = token;
  }
  emit(g, ev);
}

void OutputStage::emit(Group& g, const TokenEvent& ev) {
  if (!g.req.on_token || g.done) return;
  bool keep_going = false;
  try {
    keep_going = g.req.on_token(ev);
  } catch (const std::exception& e) {
    logger().warn("token callback of request {} threw, cancelling it: {}", g.req.id, e.what());
  }
  if (!keep_going) g.req.cancelled->store(true);
}

void OutputStage::beam_step(Group& g, const std::vector<std::size_t>& seqs,
                            const std::vector<const float*>& rows) {
  std::vector<std::uint64_t> digests;
  for (const float* r : rows)
    digests.push_back(logits_digest(r, static_cast<std::size_t>(ctx_.vocab)));
  // The engine batches beams in seqs order; the search indexes live beams in order.
  DETINFER_INTERNAL_CHECK(seqs.size() == g.beam->beams().size());
  if (!ctx_.observers.empty()) {
    for (std::size_t b = 0; b < rows.size(); ++b) {
      for (auto& o : ctx_.observers) {
        if (o->wants_logits()) {
          o->on_logits(g.req, static_cast<std::int32_t>(b),
                       static_cast<std::int32_t>(g.beam->length()), rows[b], ctx_.vocab);
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
      s.blocks = fork_blocks(ctx_.pool, parent.blocks, parent.num_computed);
      s.num_computed = parent.num_computed;
      s.pending = g.beam->beams()[i].tokens.back();
      s.sample_index = static_cast<std::int32_t>(i);
      next.push_back(std::move(s));
    }
  }
  for (SeqState& s : g.seqs) release_blocks(ctx_.pool, s.blocks);
  g.seqs = std::move(next);
  if (g.seqs.empty()) beam_finish(g);
}

// The best hypotheses of a finished beam search become the result, streamed whole.
void OutputStage::beam_finish(Group& g) {
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
    if (ctx_.tokenizer != nullptr) {
      decode::StopMatcher m(g.req.config.stop_strings);
      decode::StopMatcher::Result r = m.push(ctx_.tokenizer->decode(text_ids, true));
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
      if (ctx_.tokenizer != nullptr && t == 0) ev.text = out.text;  // the whole text at once
      ev.logprobs = t < out.logprobs.size() ? &out.logprobs[t] : nullptr;
      ev.sample_index = static_cast<std::int32_t>(i);
      ev.step = static_cast<std::int32_t>(t);
      emit(g, ev);
    }
  }
}

void OutputStage::finish_seq(Group& g, SeqState& s, FinishReason reason) {
  s.finished = true;
  s.out.finish_reason = reason;
  publish_generated(g, s);
  release_blocks(ctx_.pool, s.blocks);
}

void OutputStage::publish_generated(const Group& g, const SeqState& s) {
  const auto prompt_len = static_cast<std::int64_t>(g.req.prompt.size());
  const std::int64_t generated = std::min<std::int64_t>(
      s.num_computed - prompt_len, static_cast<std::int64_t>(s.generated.size()));  // with K/V
  if (!ctx_.prefix || g.beam || generated <= 0 ||
      (prompt_len + generated) / ctx_.pool.block_size() <= prompt_len / ctx_.pool.block_size()) {
    return;  // no full block beyond the prompt's (those were published after prefill)
  }
  std::vector<std::int32_t> tokens = g.req.prompt;
  tokens.insert(tokens.end(), s.generated.begin(), s.generated.begin() + generated);
  try {
    ctx_.prefix->publish_sequence(g.req, tokens, ctx_.pool, s.blocks);
  } catch (const std::exception& e) {
    logger().warn("prefix cache publish of generated tokens failed: {}", e.what());
  }
}

void OutputStage::cancel_group(Group& g) {
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

void OutputStage::maybe_complete(Group& g) {
  if (g.done || g.prefilling) return;
  for (const SeqState& s : g.seqs) {
    if (!s.finished) return;
  }
  if (g.beam && !g.beam->done() && g.beam_results.empty()) return;
  GenerationResult r = build_result(g);
  for (auto& o : ctx_.observers) o->on_finished(g.req, r);
  release_group(g);
  g.promise.set_value(std::move(r));
}

GenerationResult OutputStage::build_result(Group& g) {
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

void OutputStage::release_group(Group& g) {
  for (SeqState& s : g.seqs) release_blocks(ctx_.pool, s.blocks);
  g.done = true;
  on_release_(g);  // the scheduler's accounting, before the result is delivered
}

void OutputStage::fail_group(Group& g, const Error& e) {
  if (g.done) return;
  for (auto& o : ctx_.observers) o->on_failed(g.req, e);
  release_group(g);
  g.promise.set_exception(std::make_exception_ptr(e));
  keep_failed(std::move(g.promise));
}

}  // namespace detinfer::engine
