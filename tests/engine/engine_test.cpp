// The scheduler over a fake model (fake_model.h): batching, chunked prefill, forks, beams,
// cancellation and back-pressure. Labelled tsan: these run under ThreadSanitizer.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "decode/beam_search.h"
#include "detinfer/error.h"
#include "detinfer/fingerprint.h"
#include "detinfer/philox.h"
#include "engine/engine_test_support.h"
#include "engine/fake_model.h"

namespace detinfer {
namespace {

using testing::expect_same_output;
using testing::fake_logits;
using testing::FakeModel;
using testing::Gate;
using testing::kFakePoisonToken;
using testing::kFakeVocab;
using testing::random_config;
using testing::random_prompt;
using testing::request;
using testing::Rng;
using testing::run_alone;
using testing::small_options;

TEST(Engine, GreedyMatchesDirectComputationAndDigests) {
  GenerationConfig c;
  c.max_new_tokens = 12;
  c.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {5, 9, 13, 2, 40, 41, 7, 8, 9, 10};
  const GenerationResult r = run_alone(request(prompt, c));
  ASSERT_EQ(r.sequences.size(), 1u);
  const Sequence& s = r.sequences[0];
  ASSERT_EQ(s.tokens.size(), 12u);
  std::vector<std::int32_t> seq = prompt;
  std::uint64_t chain = 0;
  for (std::size_t i = 0; i < s.tokens.size(); ++i) {
    const std::vector<float> row = fake_logits(seq);
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(s.tokens[i], best) << "step " << i;
    const std::uint64_t d = logits_digest(row.data(), kFakeVocab);
    EXPECT_EQ(s.step_digests[i], d);
    chain = chain_digest(chain, d);
    seq.push_back(s.tokens[i]);
  }
  EXPECT_EQ(s.digest, chain);
  EXPECT_EQ(s.finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.timings.token_ms.size(), 12u);
}

TEST(Engine, ChunkSizeBatchSizeAndBlockSizeDoNotChangeOutput) {
  Rng rng{11, 0};
  for (int i = 0; i < 6; ++i) {
    const engine::EngineRequest r = request(random_prompt(rng, 40), random_config(rng));
    const GenerationResult base = run_alone(r);
    for (std::int32_t chunk : {1, 3, 1000}) {
      engine::EngineOptions o = small_options();
      o.prefill_chunk_tokens = chunk;
      o.kv_block_size = chunk == 3 ? 16 : 1;
      o.max_batch = chunk == 1 ? 1 : 64;
      expect_same_output(base, run_alone(r, o), "chunk " + std::to_string(chunk));
    }
  }
}

struct BatchRecorder : engine::EngineObserver {
  std::atomic<std::int32_t> max_sequences{0};
  void on_step(const engine::StepStats& s) override {
    const std::int32_t n = s.decode_sequences + s.prefill_sequences;
    if (n > max_sequences.load()) max_sequences.store(n);
  }
};

// The acceptance property over the scheduler: each request's output is the same alone
// and among K random others submitted from several threads at random times.
TEST(Engine, LoadInvarianceAmongRandomTraffic) {
  for (int k : {1, 3, 7, 15, 31}) {
    Rng rng{1234, static_cast<std::uint64_t>(k)};
    std::vector<engine::EngineRequest> reqs;
    for (int i = 0; i <= k; ++i)
      reqs.push_back(request(random_prompt(rng, 60), random_config(rng)));
    std::vector<GenerationResult> alone;
    for (const auto& r : reqs) alone.push_back(run_alone(r));

    FakeModel m;
    engine::Engine e(m, nullptr, small_options());
    auto batches = std::make_shared<BatchRecorder>();
    e.add_observer(batches);
    // At K=31 the first request's callback holds the engine until every request is
    // queued, so they surely share forward passes (checked below).
    Gate gate;
    if (k == 31) reqs[0].on_token = gate.callback();
    std::vector<std::future<GenerationResult>> futures(reqs.size());
    const int kThreads = 3;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Rng delay{99, static_cast<std::uint64_t>(t * 100 + k)};
        for (std::size_t i = t; i < reqs.size(); i += kThreads) {
          std::this_thread::sleep_for(std::chrono::microseconds(delay.next(300)));
          futures[i] = e.submit(reqs[i]);
        }
      });
    }
    for (auto& t : threads) t.join();
    gate.release();
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      expect_same_output(alone[i], futures[i].get(),
                         "K=" + std::to_string(k) + " request " + std::to_string(i));
    }
    // The property is only tested if requests really shared forward passes.
    if (k == 31) {
      EXPECT_GT(batches->max_sequences.load(), 1);
    }
  }
}

TEST(Engine, SampleIOfNEqualsThatSampleAlone) {
  GenerationConfig c;
  c.temperature = 1.0f;
  c.num_return_sequences = 4;
  c.max_new_tokens = 16;
  c.seed = 77;
  const std::vector<std::int32_t> prompt = {3, 4, 5, 6, 7, 8, 9};  // not a block multiple
  const GenerationResult all = run_alone(request(prompt, c));
  ASSERT_EQ(all.sequences.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    GenerationConfig one = c;
    one.num_return_sequences = 1;
    one.first_sample_index = i;
    const GenerationResult r = run_alone(request(prompt, one));
    EXPECT_EQ(r.sequences[0].tokens, all.sequences[i].tokens) << "sample " << i;
    EXPECT_EQ(r.sequences[0].digest, all.sequences[i].digest) << "sample " << i;
  }
  EXPECT_NE(all.sequences[0].tokens, all.sequences[1].tokens);
  GenerationConfig other = c;
  other.seed = 78;
  EXPECT_NE(run_alone(request(prompt, other)).sequences[0].tokens, all.sequences[0].tokens);
}

TEST(Engine, BeamSearchEqualsSearchOverDirectLogits) {
  for (int nb : {2, 3}) {
    GenerationConfig c;
    c.num_beams = nb;
    c.num_return_sequences = nb;
    c.max_new_tokens = 9;
    c.length_penalty = 0.5f;
    c.logprobs = 2;
    c.stop_token_ids = std::vector<std::int32_t>{testing::kFakeEos, 20, 21};
    const std::vector<std::int32_t> prompt = {10, 11, 12, 13, 14};
    const GenerationResult r = run_alone(request(prompt, c));

    decode::BeamSearch bs(c, *c.stop_token_ids, kFakeVocab);
    while (!bs.done() && bs.length() < c.max_new_tokens) {
      std::vector<std::vector<float>> rows;
      std::vector<const float*> ptrs;
      std::vector<std::uint64_t> digests;
      for (const auto& b : bs.beams()) {
        std::vector<std::int32_t> seq = prompt;
        seq.insert(seq.end(), b.tokens.begin(), b.tokens.end());
        rows.push_back(fake_logits(seq));
        digests.push_back(logits_digest(rows.back().data(), kFakeVocab));
      }
      for (const auto& row : rows) ptrs.push_back(row.data());
      bs.step(ptrs, digests, prompt);
    }
    const auto want = bs.finalize();
    ASSERT_EQ(r.sequences.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(r.sequences[i].tokens, want[i].beam.tokens) << "beam " << i;
      EXPECT_EQ(r.sequences[i].step_digests, want[i].beam.step_digests) << "beam " << i;
      EXPECT_EQ(r.sequences[i].score, static_cast<double>(want[i].score));
      EXPECT_EQ(r.sequences[i].logprobs.size(), want[i].beam.tokens.size());
    }
  }
}

TEST(Engine, StreamingEventsMatchResultAndCallbackCanCancel) {
  FakeModel m;
  engine::Engine e(m, nullptr, small_options());
  GenerationConfig c;
  c.max_new_tokens = 20;
  c.ignore_eos = true;
  c.logprobs = 1;
  std::vector<std::int32_t> seen;
  engine::EngineRequest r = request({4, 5, 6}, c);
  r.on_token = [&](const TokenEvent& ev) {
    EXPECT_EQ(ev.step, static_cast<std::int32_t>(seen.size()));
    EXPECT_NE(ev.logprobs, nullptr);
    seen.push_back(ev.token);
    return true;
  };
  const GenerationResult full = e.submit(r).get();
  EXPECT_EQ(seen, full.sequences[0].tokens);

  engine::EngineRequest cancel = request({4, 5, 6}, c);
  int calls = 0;
  cancel.on_token = [&](const TokenEvent&) { return ++calls < 3; };
  const GenerationResult part = e.submit(cancel).get();
  EXPECT_EQ(part.sequences[0].finish_reason, FinishReason::kCancelled);
  ASSERT_EQ(part.sequences[0].tokens.size(), 3u);
  EXPECT_TRUE(std::equal(part.sequences[0].tokens.begin(), part.sequences[0].tokens.end(),
                         full.sequences[0].tokens.begin()));
  // The engine keeps serving.
  r.on_token = nullptr;
  expect_same_output(full, e.submit(r).get(), "after cancel");
}

TEST(Engine, BoundedQueueAndCancelWhileQueued) {
  FakeModel m;
  engine::EngineOptions o = small_options();
  o.max_queue = 3;
  engine::Engine e(m, nullptr, o);
  GenerationConfig c;
  c.max_new_tokens = 4;
  Gate gate;
  engine::EngineRequest blocker = request({7, 8}, c);
  blocker.on_token = gate.callback();
  auto fb = e.submit(blocker);
  gate.wait_entered();
  std::vector<std::future<GenerationResult>> queued;
  std::vector<std::shared_ptr<std::atomic<bool>>> flags;
  for (int i = 0; i < 3; ++i) {
    engine::EngineRequest r = request({9, 10, static_cast<std::int32_t>(11 + i)}, c);
    flags.push_back(r.cancelled);
    queued.push_back(e.submit(r));
  }
  try {
    e.submit(request({9, 10}, c));
    FAIL() << "a full queue must refuse";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(err.message().find("max_queue"), std::string::npos) << err.message();
  }
  flags[1]->store(true);  // cancelled while waiting
  gate.release();
  EXPECT_EQ(fb.get().sequences[0].tokens.size(), 4u);
  EXPECT_EQ(queued[0].get().sequences[0].tokens.size(), 4u);
  const GenerationResult cancelled = queued[1].get();
  EXPECT_EQ(cancelled.sequences[0].finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(cancelled.sequences[0].tokens.empty());
  EXPECT_EQ(queued[2].get().sequences[0].tokens.size(), 4u);
}

TEST(Engine, RequestLargerThanKvPoolIsRefused) {
  FakeModel m;
  engine::EngineOptions o = small_options();
  o.kv_budget_bytes = 4 * 32 * 8;  // 8 blocks of 4 tokens
  engine::Engine e(m, nullptr, o);
  GenerationConfig c;
  c.max_new_tokens = 100;
  try {
    e.submit(request({1, 2, 3}, c));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(err.message().find("kv_budget_bytes"), std::string::npos);
  }
  c.max_new_tokens = 10;
  EXPECT_EQ(e.submit(request({2, 3, 4}, c)).get().sequences.size(), 1u);
}

TEST(Engine, FailedForwardFailsItsRequestsAndEngineKeepsServing) {
  FakeModel m;
  engine::Engine e(m, nullptr, small_options());
  GenerationConfig c;
  c.max_new_tokens = 5;
  try {
    e.submit(request({kFakePoisonToken, 3, 4}, c)).get();
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kInternal);
  }
  const engine::EngineRequest ok = request({3, 4, 5}, c);
  expect_same_output(run_alone(ok), e.submit(ok).get(), "after failure");
}

TEST(Engine, KvBlocksAreReturnedAfterEveryRequest) {
  FakeModel m;
  engine::Engine e(m, nullptr, small_options());
  Rng rng{5, 5};
  std::vector<std::future<GenerationResult>> fs;
  for (int i = 0; i < 20; ++i)
    fs.push_back(e.submit(request(random_prompt(rng, 30), random_config(rng))));
  for (auto& f : fs) f.get();
  // A request's blocks are released (and counted) before its result is delivered.
  EXPECT_EQ(e.stats().kv_blocks_in_use, 0);
  EXPECT_GT(e.stats().steps, 0);
}

TEST(Engine, ShutdownFailsWaitingRequestsAndRefusesNewOnes) {
  FakeModel m;
  engine::Engine e(m, nullptr, small_options());
  GenerationConfig c;
  c.max_new_tokens = 50;
  c.ignore_eos = true;
  Gate gate;
  engine::EngineRequest blocker = request({7, 8}, c);
  blocker.on_token = gate.callback();
  auto running = e.submit(blocker);
  gate.wait_entered();
  auto waiting = e.submit(request({9, 9, 9}, c));
  std::thread closer([&] { e.shutdown(); });
  // Release the gate only once shutdown has begun (submit refuses from then on); a guessed
  // delay let the running request finish first on a busy machine.
  std::vector<std::future<GenerationResult>> probes;
  for (;;) {
    try {
      probes.push_back(e.submit(request({9, 9}, c)));
    } catch (const Error& err) {
      if (err.code() == ErrorCode::kUnavailable) break;
      EXPECT_EQ(err.code(), ErrorCode::kResourceExhausted) << err.what();  // queue full
    }
    std::this_thread::yield();
  }
  gate.release();
  closer.join();
  for (auto& f : probes) {
    try {
      f.get();
      FAIL();
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::kUnavailable);
    }
  }
  for (auto* f : {&running, &waiting}) {
    try {
      f->get();
      FAIL();
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::kUnavailable);
    }
  }
  try {
    e.submit(request({1, 2}, c));
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnavailable);
  }
}

}  // namespace
}  // namespace detinfer
