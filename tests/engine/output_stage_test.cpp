// The engine's output stage on its own, without a scheduler or a model: hand-made logits
// rows go in, tokens, finished sequences, results, failures and one release call per
// request come out.
#include "engine/output_stage.h"

#include <gtest/gtest.h>

#include <chrono>

#include "engine/block_table.h"
#include "engine/fake_model.h"

namespace detinfer::testing {
namespace {

using engine::BatchEntry;
using engine::Group;
using engine::OutputStage;

// A row whose largest logit is at `best`, random elsewhere (fake_row's values lie in
// [-10, 10]).
std::vector<float> row_with_max(std::uint64_t state, std::int32_t best) {
  std::vector<float> row(kFakeVocab);
  fake_row(state, row.data());
  row[static_cast<std::size_t>(best)] = 50.0f;
  return row;
}

class OutputStageTest : public ::testing::Test {
 protected:
  OutputStageTest()
      : pool_(fake_config(), 4, 4096 * 4 * 32, model_.kv_backend(), model_.kv_dtype()),
        stage_({nullptr, kFakeVocab, pool_, observers_, prefix_, model_}, [this](Group& g) {
          // Blocks are back and the group is done before its result is delivered.
          EXPECT_TRUE(g.done);
          for (const auto& s : g.seqs) EXPECT_TRUE(s.blocks.empty());
          if (watched_ != nullptr) {
            EXPECT_NE(watched_->wait_for(std::chrono::seconds(0)), std::future_status::ready);
          }
          released_.push_back(&g);
        }) {}

  // An admitted request with its prompt's blocks taken from the pool.
  std::unique_ptr<Group> admitted(std::vector<std::int32_t> prompt, GenerationConfig c) {
    auto g = std::make_unique<Group>();
    g->req.prompt = std::move(prompt);
    if (!c.stop_token_ids) c.stop_token_ids = fake_config().eos_token_ids;
    g->req.config = c;
    g->seqs.emplace_back();
    engine::ensure_blocks(pool_, g->seqs[0].blocks,
                          static_cast<std::int64_t>(g->req.prompt.size()));
    return g;
  }

  // Feeds the whole prompt as one prefill chunk whose last row is `row`.
  void prefill(Group& g, const std::vector<float>& row) {
    const auto n = static_cast<std::int64_t>(g.req.prompt.size());
    stage_.process_rows({BatchEntry{&g, 0, n, true, 1}}, row.data());
  }

  // One decode step of sample `seq` with `row`.
  void decode(Group& g, std::size_t seq, const std::vector<float>& row) {
    engine::ensure_blocks(pool_, g.seqs[seq].blocks, g.seqs[seq].num_computed + 1);
    stage_.process_rows({BatchEntry{&g, seq, 1, false, 1}}, row.data());
  }

  FakeModel model_;
  model::KvCachePool pool_;
  std::vector<std::shared_ptr<engine::EngineObserver>> observers_;
  std::shared_ptr<engine::PrefixProvider> prefix_;
  std::vector<Group*> released_;
  std::future<GenerationResult>* watched_ = nullptr;  // must not be ready at release
  OutputStage stage_;
};

TEST_F(OutputStageTest, GreedyRowsBecomeTokensAndOneResult) {
  GenerationConfig c;
  c.max_new_tokens = 3;
  auto g = admitted({5, 6, 7}, c);
  auto result = g->promise.get_future();
  watched_ = &result;
  prefill(*g, row_with_max(1, 11));
  EXPECT_FALSE(g->prefilling);
  EXPECT_EQ(g->seqs[0].pending, 11);
  decode(*g, 0, row_with_max(2, 12));
  decode(*g, 0, row_with_max(3, 13));
  EXPECT_TRUE(g->seqs[0].finished);
  EXPECT_TRUE(released_.empty());  // finished, but not yet delivered
  stage_.maybe_complete(*g);
  ASSERT_EQ(released_.size(), 1u);
  EXPECT_EQ(pool_.free_blocks(), pool_.capacity());
  const GenerationResult r = result.get();
  ASSERT_EQ(r.sequences.size(), 1u);
  EXPECT_EQ(r.sequences[0].tokens, (std::vector<std::int32_t>{11, 12, 13}));
  EXPECT_EQ(r.sequences[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.prompt_tokens, (std::vector<std::int32_t>{5, 6, 7}));
  stage_.maybe_complete(*g);  // delivered once only
  EXPECT_EQ(released_.size(), 1u);
}

TEST_F(OutputStageTest, StopTokenFinishesWithStop) {
  GenerationConfig c;
  c.max_new_tokens = 10;
  auto g = admitted({5, 6}, c);
  auto result = g->promise.get_future();
  prefill(*g, row_with_max(1, 9));
  decode(*g, 0, row_with_max(2, kFakeEos));
  stage_.maybe_complete(*g);
  const GenerationResult r = result.get();
  EXPECT_EQ(r.sequences[0].tokens, (std::vector<std::int32_t>{9, kFakeEos}));
  EXPECT_EQ(r.sequences[0].finish_reason, FinishReason::kStop);
}

TEST_F(OutputStageTest, AFailingRequestFailsAloneInASharedStep) {
  GenerationConfig bad;
  bad.max_new_tokens = 4;
  bad.response_format.type = ResponseFormatType::kJsonObject;  // needs a tokenizer: none here
  GenerationConfig good;
  good.max_new_tokens = 1;
  auto g_bad = admitted({5}, bad);
  auto g_good = admitted({6}, good);
  auto bad_result = g_bad->promise.get_future();
  watched_ = &bad_result;
  auto good_result = g_good->promise.get_future();
  std::vector<float> rows = row_with_max(1, 20);
  const std::vector<float> second = row_with_max(2, 21);
  rows.insert(rows.end(), second.begin(), second.end());
  stage_.process_rows(
      {BatchEntry{g_bad.get(), 0, 1, true, 1}, BatchEntry{g_good.get(), 0, 1, true, 1}},
      rows.data());
  ASSERT_EQ(released_.size(), 1u);  // the failed one, at once
  EXPECT_EQ(released_[0], g_bad.get());
  try {
    bad_result.get();
    FAIL() << "the request without a tokenizer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "response_format");
  }
  watched_ = &good_result;
  stage_.maybe_complete(*g_good);
  EXPECT_EQ(good_result.get().sequences[0].tokens, std::vector<std::int32_t>{21});
  EXPECT_EQ(pool_.free_blocks(), pool_.capacity());
}

TEST_F(OutputStageTest, CancelKeepsWhatWasGenerated) {
  GenerationConfig c;
  c.max_new_tokens = 10;
  auto g = admitted({5, 6}, c);
  auto result = g->promise.get_future();
  prefill(*g, row_with_max(1, 30));
  decode(*g, 0, row_with_max(2, 31));
  stage_.cancel_group(*g);
  stage_.maybe_complete(*g);
  const GenerationResult r = result.get();
  EXPECT_EQ(r.sequences[0].tokens, (std::vector<std::int32_t>{30, 31}));
  EXPECT_EQ(r.sequences[0].finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(pool_.free_blocks(), pool_.capacity());
}

// Rows whose choices the stage prepares on host threads (prepare_choices) give each
// sequence exactly what it gets when its rows come one step and one row at a time:
// tokens, logprobs and their top lists, digests, score. Every row differs, so a prepared
// choice or digest attached to another entry's row changes a token or a digest.
TEST_F(OutputStageTest, DecodeRowsPreparedOnHostThreadsEqualRowsOneAtATime) {
  std::vector<GenerationConfig> configs(5);
  configs[0].logprobs = 3;        // greedy with top logprobs
  configs[1].temperature = 0.8f;  // seeded sampling
  configs[1].top_k = 20;
  configs[2].temperature = 1.3f;  // sampling with a penalty (reads the history)
  configs[2].repetition_penalty = 1.4f;
  configs[2].logprobs = 2;
  configs[3].presence_penalty = 1.5f;  // greedy with a penalty
  configs[4].temperature = 0.5f;
  configs[4].top_p = 0.9f;
  constexpr int kSteps = 6;
  const auto row_of = [](std::size_t i, int step) {
    std::vector<float> row(kFakeVocab);
    fake_row(1000 * (i + 1) + static_cast<std::uint64_t>(step), row.data());
    return row;
  };
  const auto run = [&](int threads, bool together) {
    model_.set_host_threads(threads);
    std::vector<std::unique_ptr<Group>> groups;
    std::vector<std::future<GenerationResult>> results;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      GenerationConfig c = configs[i];
      c.max_new_tokens = kSteps + 1;
      c.ignore_eos = true;
      groups.push_back(admitted({static_cast<std::int32_t>(5 + i), 7}, c));
      groups.back()->req.seed = 40 + i;
      results.push_back(groups.back()->promise.get_future());
      prefill(*groups.back(), row_of(i, 0));
    }
    for (int step = 1; step <= kSteps; ++step) {
      std::vector<BatchEntry> entries;
      std::vector<float> rows;
      for (std::size_t i = 0; i < groups.size(); ++i) {
        Group& g = *groups[i];
        engine::ensure_blocks(pool_, g.seqs[0].blocks, g.seqs[0].num_computed + 1);
        const std::vector<float> row = row_of(i, step);
        if (!together) {
          stage_.process_rows({BatchEntry{&g, 0, 1, false, 1}}, row.data());
          continue;
        }
        entries.push_back(BatchEntry{&g, 0, 1, false, 1});
        rows.insert(rows.end(), row.begin(), row.end());
      }
      if (together) stage_.process_rows(entries, rows.data());
    }
    std::vector<GenerationResult> out;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      stage_.maybe_complete(*groups[i]);
      out.push_back(results[i].get());
    }
    return out;
  };
  const std::vector<GenerationResult> alone = run(1, false);
  const int calls = model_.host_calls();
  const std::vector<GenerationResult> together = run(3, true);
  EXPECT_EQ(model_.host_calls() - calls, kSteps);  // every step prepared on host threads
  ASSERT_EQ(alone.size(), together.size());
  for (std::size_t i = 0; i < alone.size(); ++i) {
    SCOPED_TRACE(i);
    const Sequence& a = alone[i].sequences.at(0);
    const Sequence& b = together[i].sequences.at(0);
    EXPECT_EQ(a.tokens.size(), static_cast<std::size_t>(kSteps + 1));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.step_digests, b.step_digests);
    EXPECT_EQ(a.digest, b.digest);
    EXPECT_EQ(a.score, b.score);
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (std::size_t t = 0; t < a.logprobs.size(); ++t) {
      EXPECT_EQ(a.logprobs[t].token, b.logprobs[t].token);
      EXPECT_EQ(a.logprobs[t].logprob, b.logprobs[t].logprob);  // bitwise: same float ops
      ASSERT_EQ(a.logprobs[t].top.size(), b.logprobs[t].top.size());
      for (std::size_t k = 0; k < a.logprobs[t].top.size(); ++k) {
        EXPECT_EQ(a.logprobs[t].top[k].token, b.logprobs[t].top[k].token);
        EXPECT_EQ(a.logprobs[t].top[k].logprob, b.logprobs[t].top[k].logprob);
      }
    }
  }
  EXPECT_EQ(pool_.free_blocks(), pool_.capacity());
}

}  // namespace
}  // namespace detinfer::testing
