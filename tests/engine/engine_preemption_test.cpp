// KV admission by blocks in use with deterministic preemption (docs/session.md, "KV
// admission and preemption"): requests whose max_new_tokens the pool cannot hold all at
// once still complete, each bitwise equal to its run alone; a preempted request streams
// each token once; the victim is always the youngest preemptible running request.
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "engine/engine_test_support.h"

namespace detinfer::testing {
namespace {

// 32 bytes per token of the fake model: `blocks` blocks of 4 tokens.
engine::EngineOptions tight_options(std::int64_t blocks) {
  engine::EngineOptions o = small_options();
  o.max_batch = 16;
  o.kv_budget_bytes = 4 * 32 * blocks;
  return o;
}

// Records the scheduler's preemption events and, from the token callbacks, which requests
// were admitted (all on the engine thread), and checks the victim rule at each preemption:
// no younger preemptible request is running.
struct PreemptionLog : engine::EngineObserver {
  std::vector<std::uint64_t> preempted;
  std::vector<std::uint64_t> resumed;
  std::set<std::uint64_t> streamed, finished, waiting, beams;
  std::vector<std::string> violations;
  void on_preempted(const engine::EngineRequest& r) override {
    for (const std::uint64_t q : streamed) {
      if (q > r.id && !finished.count(q) && !waiting.count(q) && !beams.count(q)) {
        violations.push_back("request " + std::to_string(r.id) + " preempted while younger " +
                             std::to_string(q) + " runs");
      }
    }
    preempted.push_back(r.id);
    waiting.insert(r.id);
  }
  void on_resumed(const engine::EngineRequest& r) override {
    // Preempted requests go back to the front of the queue in admission order.
    if (r.id != *waiting.begin()) {
      violations.push_back("request " + std::to_string(r.id) + " resumed before " +
                           std::to_string(*waiting.begin()));
    }
    resumed.push_back(r.id);
    waiting.erase(r.id);
  }
  void on_finished(const engine::EngineRequest& r, GenerationResult&) override {
    finished.insert(r.id);
  }
};

// The events a request streamed: (sample, step) -> token, and how often each came.
struct Stream {
  std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t> tokens;
  std::map<std::pair<std::int32_t, std::int32_t>, int> count;
};

GenerationConfig config_kind(int kind) {
  GenerationConfig c;
  c.max_new_tokens = 60;
  c.ignore_eos = true;
  switch (kind % 5) {
    case 0:
      break;  // greedy
    case 1:
      c.temperature = 0.9f;
      c.top_k = 20;
      c.repetition_penalty = 1.3f;
      c.seed = 11 + kind;
      break;
    case 2:
      c.temperature = 1.1f;
      c.top_p = 0.9f;
      c.num_return_sequences = 2;
      c.max_new_tokens = 30;
      c.seed = 5 + kind;
      break;
    case 3:
      c.logprobs = 3;
      c.temperature = 0.7f;
      c.seed = 3;
      break;
    default:
      c.draft_tokens = 3;  // speculative decoding (n-gram drafter)
      break;
  }
  return c;
}

void expect_same_logprobs(const GenerationResult& a, const GenerationResult& b,
                          const std::string& what) {
  ASSERT_EQ(a.sequences.size(), b.sequences.size()) << what;
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    const auto& x = a.sequences[i].logprobs;
    const auto& y = b.sequences[i].logprobs;
    ASSERT_EQ(x.size(), y.size()) << what;
    for (std::size_t t = 0; t < x.size(); ++t) {
      EXPECT_EQ(x[t].token, y[t].token) << what;
      EXPECT_EQ(std::memcmp(&x[t].logprob, &y[t].logprob, sizeof(float)), 0) << what;
      ASSERT_EQ(x[t].top.size(), y[t].top.size()) << what;
      for (std::size_t k = 0; k < x[t].top.size(); ++k) {
        EXPECT_EQ(x[t].top[k].token, y[t].top[k].token) << what;
        EXPECT_EQ(std::memcmp(&x[t].top[k].logprob, &y[t].top[k].logprob, sizeof(float)), 0)
            << what;
      }
    }
  }
}

struct Traffic {
  std::vector<engine::EngineRequest> requests;
  std::vector<GenerationResult> results;
  std::vector<Stream> streams;
  std::shared_ptr<PreemptionLog> log = std::make_shared<PreemptionLog>();
  engine::EngineStats stats;
};

// Submits every request behind a blocker that holds the engine thread, so that all of
// them are queued before the first admission: the schedule (and so the preemptions) is
// the same in every run.
void run_traffic(Traffic& t, const engine::EngineOptions& o) {
  FakeModel m;
  engine::Engine e(m, nullptr, o);
  e.add_observer(t.log);
  GenerationConfig one;
  one.max_new_tokens = 1;
  Gate gate;
  engine::EngineRequest blocker = request({5}, one);
  blocker.id = 1000;
  blocker.on_token = gate.callback();
  auto fb = e.submit(blocker);
  gate.wait_entered();
  t.streams.resize(t.requests.size());
  std::vector<std::future<GenerationResult>> fs;
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    engine::EngineRequest r = t.requests[i];
    if (r.config.num_beams > 1) t.log->beams.insert(r.id);
    Stream* s = &t.streams[i];
    PreemptionLog* log = t.log.get();
    const std::uint64_t id = r.id;
    r.on_token = [s, log, id](const TokenEvent& ev) {
      log->streamed.insert(id);
      s->tokens[{ev.sample_index, ev.step}] = ev.token;
      ++s->count[{ev.sample_index, ev.step}];
      return true;
    };
    fs.push_back(e.submit(std::move(r)));
  }
  gate.release();
  fb.get();
  for (auto& f : fs) t.results.push_back(f.get());
  t.stats = e.stats();
}

std::vector<engine::EngineRequest> mixed_requests(int count) {
  Rng rng{21, 3};
  std::vector<engine::EngineRequest> rs;
  for (int i = 0; i < count; ++i) {
    engine::EngineRequest r = request(random_prompt(rng, 8), config_kind(i));
    r.id = static_cast<std::uint64_t>(i + 1);
    rs.push_back(std::move(r));
  }
  return rs;
}

void expect_streamed_once(const Stream& s, const GenerationResult& r, const std::string& what) {
  std::size_t events = 0;
  for (std::size_t i = 0; i < r.sequences.size(); ++i) {
    const auto& tokens = r.sequences[i].tokens;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      const std::pair<std::int32_t, std::int32_t> key{static_cast<std::int32_t>(i),
                                                      static_cast<std::int32_t>(t)};
      ASSERT_EQ(s.count.count(key), 1u) << what << " sample " << i << " step " << t;
      EXPECT_EQ(s.count.at(key), 1) << what << " sample " << i << " step " << t;
      EXPECT_EQ(s.tokens.at(key), tokens[t]) << what;
    }
    events += tokens.size();
  }
  EXPECT_EQ(s.count.size(), events) << what << ": an event beyond the result";
}

TEST(EnginePreemption, RequestsThePoolCannotHoldAllCompleteEqualToAlone) {
  // 10 requests of up to 8 + 60 tokens (17 blocks each) on a pool of 24 blocks: admitted
  // by their prompts, preempted and resumed as the pool runs out.
  Traffic t;
  t.requests = mixed_requests(10);
  run_traffic(t, tight_options(24));
  ASSERT_EQ(t.results.size(), t.requests.size());
  EXPECT_GT(t.stats.preemptions, 0) << "the pool must have run out";
  EXPECT_EQ(t.stats.resumptions, t.stats.preemptions) << "every preempted request resumed";
  EXPECT_EQ(t.stats.kv_blocks_in_use, 0);
  std::set<std::uint64_t> kinds_preempted;
  for (const std::uint64_t id : t.log->preempted) kinds_preempted.insert((id - 1) % 5);
  EXPECT_EQ(kinds_preempted.size(), 5u) << "every kind of request was preempted at least once";
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const std::string what = "request " + std::to_string(t.requests[i].id);
    const GenerationResult alone = run_alone(t.requests[i]);
    expect_same_output(alone, t.results[i], what);
    expect_same_logprobs(alone, t.results[i], what);
    for (const Sequence& s : t.results[i].sequences) {
      EXPECT_EQ(s.tokens.size(), static_cast<std::size_t>(t.requests[i].config.max_new_tokens));
    }
  }
  EXPECT_TRUE(t.log->violations.empty()) << t.log->violations.front();
}

TEST(EnginePreemption, StreamedPreemptedRequestDeliversEachTokenOnce) {
  Traffic t;
  t.requests = mixed_requests(10);
  run_traffic(t, tight_options(24));
  ASSERT_FALSE(t.log->preempted.empty());
  std::set<std::uint64_t> preempted(t.log->preempted.begin(), t.log->preempted.end());
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const std::string what = "request " + std::to_string(t.requests[i].id) +
                             (preempted.count(t.requests[i].id) ? " (preempted)" : "");
    expect_streamed_once(t.streams[i], t.results[i], what);
  }
}

TEST(EnginePreemption, VictimIsTheYoungestPreemptibleRunningRequest) {
  // A, B, C (prompts of 4 tokens, 40 greedy tokens each: 11 blocks) are admitted together
  // on 16 blocks; the first to be preempted is C, the last admitted.
  Traffic t;
  GenerationConfig c;
  c.max_new_tokens = 40;
  c.ignore_eos = true;
  for (std::uint64_t id = 1; id <= 3; ++id) {
    engine::EngineRequest r = request({3, 4, 5, static_cast<std::int32_t>(5 + id)}, c);
    r.id = id;
    t.requests.push_back(std::move(r));
  }
  run_traffic(t, tight_options(16));
  ASSERT_FALSE(t.log->preempted.empty());
  EXPECT_EQ(t.log->preempted.front(), 3u);
  EXPECT_TRUE(t.log->violations.empty()) << t.log->violations.front();
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    expect_same_output(run_alone(t.requests[i]), t.results[i], "request " + std::to_string(i));
  }
  // The same traffic schedules the same preemptions: the rule depends on nothing else.
  Traffic again;
  again.requests = t.requests;
  run_traffic(again, tight_options(16));
  EXPECT_EQ(again.log->preempted, t.log->preempted);
  EXPECT_EQ(again.log->resumed, t.log->resumed);
}

TEST(EnginePreemption, BeamSearchesAreNeverPreemptedAndMixedTrafficCompletes) {
  // Beam searches hold their worst case from admission; sampled requests around them are
  // preempted instead, and every request still equals its run alone.
  Traffic t;
  t.requests = mixed_requests(8);
  GenerationConfig beam;
  beam.num_beams = 2;
  beam.max_new_tokens = 20;
  beam.ignore_eos = true;
  for (std::uint64_t k = 0; k < 2; ++k) {
    engine::EngineRequest r = request({7, 8, static_cast<std::int32_t>(9 + k)}, beam);
    r.id = 20 + k;
    t.requests.insert(t.requests.begin() + static_cast<std::ptrdiff_t>(2 + 3 * k), r);
  }
  run_traffic(t, tight_options(30));
  EXPECT_GT(t.stats.preemptions, 0);
  for (const std::uint64_t id : t.log->preempted) EXPECT_LT(id, 20u) << "a beam search";
  EXPECT_TRUE(t.log->violations.empty()) << t.log->violations.front();
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    expect_same_output(run_alone(t.requests[i]), t.results[i],
                       "request " + std::to_string(t.requests[i].id));
  }
  EXPECT_EQ(t.stats.kv_blocks_in_use, 0);
}

// The rows a scoring request's score_prepare saw, by step (called concurrently).
struct PreparedRows {
  std::mutex mu;
  std::map<std::int64_t, std::vector<float>> rows;
};

TEST(EnginePreemption, TeacherForcedScoringIsNeverPreemptedAndSeesEachRowOnce) {
  // Scoring requests (EngineRequest::score_row) hold their prompt's blocks and are never
  // preempted; among preempted traffic each hands every position's row over once, in
  // order, equal to the row computed directly. With score_prepare (the second one), every
  // row goes to it once before score_row sees it.
  auto prepared = std::make_shared<PreparedRows>();
  Traffic t;
  t.requests = mixed_requests(8);
  std::vector<std::shared_ptr<std::vector<std::vector<float>>>> rows;
  for (std::uint64_t k = 0; k < 2; ++k) {
    Rng rng{7, k};
    std::vector<std::int32_t> prompt(40);
    for (auto& x : prompt) x = 2 + static_cast<std::int32_t>(rng.next(kFakeVocab - 4));
    GenerationConfig c;
    c.max_new_tokens = 1;
    engine::EngineRequest r = request(prompt, c);
    r.id = 30 + k;
    auto seen = std::make_shared<std::vector<std::vector<float>>>();
    r.score_row = [seen, prepared, k](std::int64_t step, const float* row) {
      EXPECT_EQ(step, static_cast<std::int64_t>(seen->size()));
      seen->emplace_back(row, row + kFakeVocab);
      if (k == 1) {
        std::lock_guard<std::mutex> lk(prepared->mu);
        const auto it = prepared->rows.find(step);
        EXPECT_TRUE(it != prepared->rows.end()) << "step " << step << " scored unprepared";
        if (it != prepared->rows.end()) {
          EXPECT_EQ(it->second, seen->back()) << "step " << step;
        }
      }
      return true;
    };
    if (k == 1) {
      r.score_prepare = [prepared](std::int64_t step, const float* rows, std::int64_t count) {
        EXPECT_GT(count, 0);
        std::lock_guard<std::mutex> lk(prepared->mu);
        for (std::int64_t i = 0; i < count; ++i) {
          EXPECT_EQ(prepared->rows.count(step + i), 0u) << "step " << step + i << " prepared twice";
          const float* row = rows + i * kFakeVocab;
          prepared->rows[step + i].assign(row, row + kFakeVocab);
        }
      };
    }
    rows.push_back(seen);
    t.requests.insert(t.requests.begin() + static_cast<std::ptrdiff_t>(3 + 4 * k), r);
  }
  run_traffic(t, tight_options(24));
  EXPECT_GT(t.stats.preemptions, 0);
  for (const std::uint64_t id : t.log->preempted) EXPECT_LT(id, 30u) << "a scoring request";
  for (std::size_t i = 0, k = 0; i < t.requests.size(); ++i) {
    const engine::EngineRequest& r = t.requests[i];
    if (!r.score_row) {
      expect_same_output(run_alone(r), t.results[i], "request " + std::to_string(r.id));
      continue;
    }
    const std::vector<std::vector<float>>& seen = *rows[k++];
    ASSERT_EQ(seen.size(), r.prompt.size());
    if (k == 2) {
      EXPECT_EQ(prepared->rows.size(), seen.size());
    }
    for (std::size_t p = 0; p < seen.size(); ++p) {
      const std::vector<std::int32_t> prefix(r.prompt.begin(),
                                             r.prompt.begin() + static_cast<std::ptrdiff_t>(p + 1));
      EXPECT_EQ(seen[p], fake_logits(prefix)) << "scoring request " << r.id << " position " << p;
    }
  }
}

TEST(EnginePreemption, MaxNewTokensThatFitThePoolAloneNeverFail) {
  // Each request alone fills most of the pool; together they could never be reserved up
  // front. None is refused and all complete.
  Traffic t;
  GenerationConfig c;
  c.max_new_tokens = 80;  // (2 + 80) / 4 -> 21 of 24 blocks
  c.ignore_eos = true;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    engine::EngineRequest r = request({2, static_cast<std::int32_t>(10 + id)}, c);
    r.id = id;
    t.requests.push_back(std::move(r));
  }
  run_traffic(t, tight_options(24));
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    ASSERT_EQ(t.results[i].sequences[0].tokens.size(), 80u);
    expect_same_output(run_alone(t.requests[i]), t.results[i], "request " + std::to_string(i));
  }
  EXPECT_GT(t.stats.preemptions, 0);
}

TEST(EnginePreemption, SixtyFourRequestsOf2048TokensOnAnEighthOfTheirReservation) {
  // Issue 32's acceptance shape: 64 concurrent requests with max_new_tokens 2048 and short
  // prompts on a pool of 4096 blocks of 4 tokens, an eighth of the 64 x 515 blocks an
  // up-front reservation would take. All complete, each equal to its run alone.
  Traffic t;
  Rng rng{64, 2048};
  for (int i = 0; i < 64; ++i) {
    GenerationConfig c;
    c.max_new_tokens = 2048;
    c.ignore_eos = true;
    if (i % 2 == 1) {
      c.temperature = 0.8f;
      c.seed = static_cast<std::uint64_t>(i);
    }
    engine::EngineRequest r = request(random_prompt(rng, 8), c);
    r.id = static_cast<std::uint64_t>(i + 1);
    t.requests.push_back(std::move(r));
  }
  engine::EngineOptions o = tight_options(4096);
  o.max_batch = 64;
  o.prefill_chunk_tokens = 512;
  run_traffic(t, o);
  EXPECT_GT(t.stats.preemptions, 0);
  EXPECT_EQ(t.stats.resumptions, t.stats.preemptions);
  EXPECT_TRUE(t.log->violations.empty()) << t.log->violations.front();
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    ASSERT_EQ(t.results[i].sequences[0].tokens.size(), 2048u);
    expect_same_output(run_alone(t.requests[i], o), t.results[i],
                       "request " + std::to_string(i + 1));
    expect_streamed_once(t.streams[i], t.results[i], "request " + std::to_string(i + 1));
  }
}

// Cancels one request the moment it is preempted (on the engine thread): it is then
// waiting in the queue, holding no blocks, with tokens already streamed.
struct CancelOnPreemption : engine::EngineObserver {
  std::uint64_t target = 0;
  std::function<void()> cancel;
  int finished = 0;
  void on_preempted(const engine::EngineRequest& r) override {
    if (r.id == target && cancel) std::exchange(cancel, nullptr)();
  }
  void on_finished(const engine::EngineRequest& r, GenerationResult&) override {
    if (r.id == target) ++finished;
  }
};

TEST(EnginePreemption, CancelledWhileWaitingAfterPreemptionKeepsWhatItStreamed) {
  FakeModel m;
  engine::Engine e(m, nullptr, tight_options(16));
  auto cancel = std::make_shared<CancelOnPreemption>();
  e.add_observer(cancel);
  Gate gate;
  auto fb = hold_engine(e, gate);
  GenerationConfig c;
  c.max_new_tokens = 40;
  c.ignore_eos = true;
  std::vector<engine::EngineRequest> rs;
  std::vector<std::future<GenerationResult>> fs;
  std::vector<std::int32_t> streamed;  // of the last request (engine thread, read after)
  for (std::uint64_t id = 1; id <= 3; ++id) {
    engine::EngineRequest r = request({3, 4, 5, static_cast<std::int32_t>(5 + id)}, c);
    r.id = id;
    rs.push_back(r);
    rs.back().cancelled = std::make_shared<std::atomic<bool>>(false);  // for its run alone
    if (id == 3) {
      r.on_token = [&streamed](const TokenEvent& ev) {
        streamed.push_back(ev.token);
        return true;
      };
      cancel->target = 3;
      cancel->cancel = e.canceller(r.cancelled);
    }
    fs.push_back(e.submit(std::move(r)));
  }
  gate.release();
  fb.get();
  const GenerationResult r0 = fs[0].get();
  const GenerationResult r1 = fs[1].get();
  const GenerationResult r2 = fs[2].get();
  expect_same_output(run_alone(rs[0]), r0, "request 1");
  expect_same_output(run_alone(rs[1]), r1, "request 2");
  ASSERT_EQ(r2.sequences.size(), 1u);
  const Sequence& cut = r2.sequences[0];
  EXPECT_EQ(cut.finish_reason, FinishReason::kCancelled);
  ASSERT_FALSE(cut.tokens.empty()) << "it was preempted after streaming tokens";
  ASSERT_LT(cut.tokens.size(), 40u);
  EXPECT_EQ(cut.tokens, streamed);
  const Sequence full = run_alone(rs[2]).sequences[0];
  ASSERT_EQ(full.tokens.size(), 40u);
  EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), full.tokens.begin()));
  EXPECT_EQ(cancel->finished, 1);  // observers see it finish once, like a running request
  EXPECT_EQ(e.stats().kv_blocks_in_use, 0);
  EXPECT_EQ(e.stats().resumptions + 1, e.stats().preemptions);
}

}  // namespace
}  // namespace detinfer::testing
