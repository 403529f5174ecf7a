// Speculative decoding in the scheduler (docs/speculative.md) over the fake model: with
// any drafter and any draft length, every output equals plain decoding bit for bit, and
// the acceptance counters show what was verified.
#include <gtest/gtest.h>

#include <map>

#include "detinfer/philox.h"
#include "engine/engine.h"
#include "engine/engine_test_support.h"
#include "engine/fake_model.h"

namespace detinfer::engine {
namespace {

using testing::expect_same_output;
using testing::FakeModel;
using testing::kFakeVocab;
using testing::random_config;
using testing::random_prompt;
using testing::request;
using testing::Rng;
using testing::run_alone;
using testing::small_options;

using Drafter = decltype(EngineRequest::drafter);

// Proposes the reference continuation of each sample (the tokens plain decoding chose),
// each token replaced by a wrong one with probability `wrong_percent`/100 (Philox keyed by
// sample and position, so the corruption is fixed).
Drafter replay_drafter(const GenerationResult& ref, std::uint32_t wrong_percent) {
  return [ref, wrong_percent](std::int32_t sample, const std::vector<std::int32_t>& generated,
                              std::int32_t max, std::vector<std::int32_t>& out) {
    const std::vector<std::int32_t>& t = ref.sequences.at(static_cast<std::size_t>(sample)).tokens;
    for (std::size_t p = generated.size(); p < t.size() && out.size() < std::size_t(max); ++p) {
      const bool wrong =
          philox_bits(7, static_cast<std::uint64_t>(sample), p, 0) % 100 < wrong_percent;
      out.push_back(wrong ? (t[p] + 1) % static_cast<std::int32_t>(kFakeVocab) : t[p]);
    }
  };
}

struct SpecRun {
  GenerationResult result;
  EngineStats stats;
};

SpecRun run_with(const EngineRequest& r, const EngineOptions& o = small_options()) {
  FakeModel m;
  Engine e(m, nullptr, o);
  SpecRun run;
  run.result = e.submit(r).get();
  run.stats = e.stats();
  return run;
}

void expect_same_logprobs(const GenerationResult& a, const GenerationResult& b) {
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    const auto& la = a.sequences[i].logprobs;
    const auto& lb = b.sequences[i].logprobs;
    ASSERT_EQ(la.size(), lb.size());
    for (std::size_t t = 0; t < la.size(); ++t) {
      EXPECT_EQ(la[t].token, lb[t].token);
      EXPECT_EQ(la[t].logprob, lb[t].logprob);
      ASSERT_EQ(la[t].top.size(), lb[t].top.size());
      for (std::size_t k = 0; k < la[t].top.size(); ++k) {
        EXPECT_EQ(la[t].top[k].token, lb[t].top[k].token);
        EXPECT_EQ(la[t].top[k].logprob, lb[t].top[k].logprob);
      }
    }
  }
}

GenerationConfig sampled(std::int32_t n) {
  GenerationConfig c;
  c.max_new_tokens = 24;
  c.temperature = 0.8f;
  c.top_k = 30;
  c.seed = 99;
  c.num_return_sequences = n;
  c.logprobs = 3;
  c.repetition_penalty = 1.3f;
  return c;
}

TEST(EngineSpeculative, CorrectDraftsAreAcceptedAndChangeNothing) {
  const std::vector<std::int32_t> prompt = {5, 9, 13, 2, 40, 41, 7};
  for (const GenerationConfig& base : {GenerationConfig{}, sampled(1), sampled(3)}) {
    GenerationConfig plain = base;
    plain.max_new_tokens = 24;
    plain.ignore_eos = true;
    const SpecRun ref = run_with(request(prompt, plain));
    EXPECT_EQ(ref.stats.draft_tokens, 0);
    for (std::int32_t k = 1; k <= 8; ++k) {
      SCOPED_TRACE("draft_tokens " + std::to_string(k));
      EngineRequest r = request(prompt, plain);
      r.config.draft_tokens = k;
      r.drafter = replay_drafter(ref.result, 0);
      const SpecRun spec = run_with(r);
      expect_same_output(ref.result, spec.result, "oracle drafter");
      expect_same_logprobs(ref.result, spec.result);
      EXPECT_GT(spec.stats.draft_tokens, 0);
      // Every proposal is the token the target chooses: all are accepted, and the run
      // needs fewer forward passes than tokens.
      EXPECT_EQ(spec.stats.accepted_draft_tokens, spec.stats.draft_tokens);
      EXPECT_LT(spec.stats.steps, ref.stats.steps);
    }
  }
}

TEST(EngineSpeculative, WrongDraftsAreNeverAccepted) {
  // The negative test: a drafter that proposes only tokens the target would not choose.
  // Accepting any of them would change the output; none may be accepted.
  const std::vector<std::int32_t> prompt = {3, 4, 5, 6, 7, 8, 9, 10, 11};
  for (const GenerationConfig& base : {GenerationConfig{}, sampled(2)}) {
    GenerationConfig c = base;
    c.ignore_eos = true;
    const SpecRun ref = run_with(request(prompt, c));
    EngineRequest r = request(prompt, c);
    r.config.draft_tokens = 4;
    r.drafter = replay_drafter(ref.result, 100);
    const SpecRun spec = run_with(r);
    expect_same_output(ref.result, spec.result, "wrong drafts");
    expect_same_logprobs(ref.result, spec.result);
    EXPECT_GT(spec.stats.draft_tokens, 0);
    EXPECT_EQ(spec.stats.accepted_draft_tokens, 0);
  }
}

TEST(EngineSpeculative, PartlyWrongDraftsAtEveryLengthAndShape) {
  Rng rng{23, 0};
  for (int i = 0; i < 12; ++i) {
    GenerationConfig c = random_config(rng);
    if (c.num_beams > 1) c.num_beams = 1;
    c.logprobs = static_cast<std::int32_t>(rng.next(3));
    const EngineRequest base = request(random_prompt(rng, 30), c);
    const SpecRun ref = run_with(base);
    for (std::uint32_t wrong : {0u, 30u, 70u}) {
      EngineRequest r = base;
      r.config.draft_tokens = 1 + static_cast<std::int32_t>(rng.next(8));
      r.drafter = replay_drafter(ref.result, wrong);
      for (std::int32_t chunk : {1, 7}) {
        EngineOptions o = small_options();
        o.prefill_chunk_tokens = chunk;
        o.kv_block_size = chunk == 1 ? 1 : 4;
        const std::string what = "request " + std::to_string(i) + " wrong% " +
                                 std::to_string(wrong) + " chunk " + std::to_string(chunk);
        const SpecRun spec = run_with(r, o);
        expect_same_output(ref.result, spec.result, what);
        expect_same_logprobs(ref.result, spec.result);
        EXPECT_LE(spec.stats.accepted_draft_tokens, spec.stats.draft_tokens);
      }
    }
  }
}

TEST(EngineSpeculative, NgramDrafterOnRepeatingTextChangesNothing) {
  // The built-in drafter (no hook): a prompt of a repeated pattern gives it matches.
  std::vector<std::int32_t> prompt;
  for (int rep = 0; rep < 4; ++rep) {
    for (std::int32_t t : {11, 12, 13, 14, 15}) prompt.push_back(t);
  }
  GenerationConfig c;
  c.max_new_tokens = 20;
  c.ignore_eos = true;
  const SpecRun ref = run_with(request(prompt, c));
  for (std::int32_t k : {1, 3, 8}) {
    EngineRequest r = request(prompt, c);
    r.config.draft_tokens = k;
    const SpecRun spec = run_with(r);
    expect_same_output(ref.result, spec.result, "ngram " + std::to_string(k));
    EXPECT_GT(spec.stats.draft_tokens, 0);  // the pattern in the prompt was proposed
  }
}

TEST(EngineSpeculative, BatchMixesSpeculatingAndPlainSequences) {
  Rng rng{31, 0};
  std::vector<EngineRequest> reqs;
  std::vector<GenerationResult> refs;
  for (int i = 0; i < 6; ++i) {
    GenerationConfig c = random_config(rng);
    const EngineRequest r = request(random_prompt(rng, 25), c);
    refs.push_back(run_alone(r));
    reqs.push_back(r);
    if (c.num_beams == 1 && i % 2 == 0) {  // every other request speculates
      reqs.back().config.draft_tokens = 1 + i;
      reqs.back().drafter = replay_drafter(refs.back(), 20);
    }
  }
  FakeModel m;
  Engine e(m, nullptr, small_options());
  std::vector<std::future<GenerationResult>> fs;
  for (const EngineRequest& r : reqs) fs.push_back(e.submit(r));
  for (std::size_t i = 0; i < fs.size(); ++i) {
    expect_same_output(refs[i], fs[i].get(), "batched request " + std::to_string(i));
  }
  EXPECT_GT(e.stats().accepted_draft_tokens, 0);
}

TEST(EngineSpeculative, CallbackCancellationStopsAtTheSameToken) {
  GenerationConfig c;
  c.max_new_tokens = 30;
  c.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {20, 21, 22, 23};
  const SpecRun full = run_with(request(prompt, c));
  for (std::int32_t stop_at : {0, 3, 10}) {
    const auto cancel_at = [stop_at](const TokenEvent& ev) { return ev.step < stop_at; };
    EngineRequest plain = request(prompt, c);
    plain.on_token = cancel_at;
    EngineRequest spec = plain;
    spec.cancelled = std::make_shared<std::atomic<bool>>(false);  // its own flag
    spec.config.draft_tokens = 8;
    spec.drafter = replay_drafter(full.result, 0);
    const SpecRun a = run_with(plain);
    const SpecRun b = run_with(spec);
    expect_same_output(a.result, b.result, "cancelled at " + std::to_string(stop_at));
    EXPECT_EQ(b.result.sequences[0].finish_reason, FinishReason::kCancelled);
    EXPECT_EQ(b.result.sequences[0].tokens.size(), static_cast<std::size_t>(stop_at + 1));
  }
}

TEST(EngineSpeculative, StopTokensEndTheSampleInsideAVerifyPass) {
  // Stop ids that the reference run chooses mid-way: with drafts past them, the sample
  // still ends exactly there.
  GenerationConfig c;
  c.max_new_tokens = 30;
  c.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {30, 31, 32};
  const SpecRun full = run_with(request(prompt, c));
  GenerationConfig stop = c;
  stop.ignore_eos = false;
  stop.stop_token_ids = std::vector<std::int32_t>{full.result.sequences[0].tokens[9]};
  const SpecRun ref = run_with(request(prompt, stop));
  EngineRequest r = request(prompt, stop);
  r.config.draft_tokens = 8;
  r.drafter = replay_drafter(full.result, 0);
  const SpecRun spec = run_with(r);
  expect_same_output(ref.result, spec.result, "stop token");
  EXPECT_EQ(spec.result.sequences[0].finish_reason, FinishReason::kStop);
}

TEST(EngineSpeculative, FastModeRefusesItNamingTheField) {
  // In fast mode a verify pass's rows may differ from decode steps' rows: refused.
  struct FastModel : FakeModel {
    NumericsMode mode() const override { return NumericsMode::kFast; }
  };
  FastModel m;
  Engine e(m, nullptr, small_options());
  GenerationConfig c;
  c.draft_tokens = 2;
  try {
    e.submit(request({3, 4, 5}, c));
    FAIL() << "fast mode speculated";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(err.field(), "draft_tokens");
  }
  c.draft_tokens = 0;
  EXPECT_EQ(e.submit(request({3, 4, 5}, c)).get().sequences.size(), 1u);
}

}  // namespace
}  // namespace detinfer::engine
