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

}  // namespace
}  // namespace detinfer::testing
