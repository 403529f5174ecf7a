// The forward pass against an independent float64 implementation, and the canonical
// mode's bitwise invariances (chunking, decode, batching, threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "detinfer/error.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/reference_forward.h"
#include "model/reference_moe.h"
#include "model/reference_olmo2.h"
#include "model/reference_phi3.h"

namespace detinfer {
namespace {

using testing::ReferenceModel;
using testing::rel_l2;
using testing::scratch_dir;
using testing::test_tokens;
using testing::tiny_options;

// Runs `steps` (each a list of (sequence, chunk of new tokens)) over fresh KV blocks and
// returns each sequence's logits rows for every position, concatenated.
class Runner {
 public:
  Runner(model::Model& model, std::int64_t block_size = 16)
      : model_(model), kv_(model.config(), block_size, std::int64_t{64} << 20) {}

  // Prefills sequence `seq` (its full token list) in chunks of `chunk`, interleaving
  // nothing; returns logits of every position.
  std::vector<float> run_chunked(const std::vector<std::int32_t>& tokens, std::size_t chunk) {
    std::vector<std::vector<std::int32_t>> seqs{tokens};
    return run_batched(seqs, {chunk})[0];
  }

  // All sequences advance together: at each step every unfinished sequence contributes
  // its next chunk (its own chunk size), so the batch mixes lengths and positions.
  std::vector<std::vector<float>> run_batched(const std::vector<std::vector<std::int32_t>>& seqs,
                                              const std::vector<std::size_t>& chunks) {
    const std::size_t n = seqs.size();
    std::vector<std::vector<std::int32_t>> tables(n);
    for (std::size_t s = 0; s < n; ++s) {
      const std::size_t blocks = (seqs[s].size() + kv_.block_size() - 1) / kv_.block_size();
      // Interleave allocations across sequences so block tables are not contiguous.
      for (std::size_t b = 0; b < blocks; ++b) tables[s].push_back(kv_.allocate());
      std::reverse(tables[s].begin(), tables[s].end());
    }
    std::vector<std::size_t> done(n, 0);
    std::vector<std::vector<float>> out(n);
    const std::int64_t vocab = model_.config().vocab_size;
    while (true) {
      std::vector<model::SequenceStep> batch;
      std::vector<std::size_t> ids;
      for (std::size_t s = 0; s < n; ++s) {
        if (done[s] == seqs[s].size()) continue;
        const std::size_t take = std::min(chunks[s], seqs[s].size() - done[s]);
        model::SequenceStep st;
        st.tokens.assign(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + take);
        st.start_pos = static_cast<std::int64_t>(done[s]);
        st.block_table = tables[s];
        st.all_logits = true;
        batch.push_back(st);
        ids.push_back(s);
        done[s] += take;
      }
      if (batch.empty()) break;
      std::vector<float> logits;
      model_.forward(batch, kv_, logits);
      std::size_t off = 0;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const std::size_t rows = batch[i].tokens.size() * static_cast<std::size_t>(vocab);
        out[ids[i]].insert(out[ids[i]].end(), logits.begin() + off, logits.begin() + off + rows);
        off += rows;
      }
      EXPECT_EQ(off, logits.size());
    }
    for (auto& t : tables) {
      for (auto b : t) kv_.release(b);
    }
    return out;
  }

 private:
  model::Model& model_;
  model::KvCachePool kv_;
};

struct Case {
  devtools::TinyArch arch;
  core::DType dtype;
};

class ForwardVsReference : public ::testing::TestWithParam<Case> {};

// The float64 pass of the architecture's transformers semantics.
std::unique_ptr<ReferenceModel> reference_for(devtools::TinyArch arch, const std::string& dir) {
  if (arch == devtools::TinyArch::kOlmo2) return std::make_unique<testing::ReferenceOlmo2>(dir);
  if (arch == devtools::TinyArch::kPhi3) return std::make_unique<testing::ReferencePhi3>(dir);
  if (arch == devtools::TinyArch::kQwen3Moe || arch == devtools::TinyArch::kMixtral ||
      arch == devtools::TinyArch::kQwen2Moe)
    return std::make_unique<testing::ReferenceMoe>(dir);
  return std::make_unique<ReferenceModel>(dir);
}

TEST_P(ForwardVsReference, EveryPositionWithinTolerance) {
  const Case c = GetParam();
  const std::string dir = scratch_dir("ref");
  devtools::make_tiny_model(tiny_options(c.arch, c.dtype, dir, 7));
  const std::unique_ptr<ReferenceModel> ref_model = reference_for(c.arch, dir);
  const ReferenceModel& ref = *ref_model;
  const auto tokens = test_tokens(40, ref.vocab());
  const auto expected = ref.logits(tokens);
  double max_err[2] = {0, 0};
  std::vector<float> canonical;
  for (NumericsMode mode : {NumericsMode::kCanonical, NumericsMode::kFast}) {
    if (mode == NumericsMode::kFast && !DETINFER_TEST_WITH_TORCH) continue;  // no libtorch
    auto model = model::Model::load(dir, {mode, 1, {}});
    Runner runner(*model);
    const auto got = runner.run_chunked(tokens, tokens.size());
    if (mode == NumericsMode::kCanonical) canonical = got;
    if (mode == NumericsMode::kFast) {
      // Token-by-token decode takes libtorch's one-row paths (gemv).
      const auto decoded = runner.run_chunked(tokens, 1);
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        EXPECT_LE(rel_l2(decoded.data() + t * ref.vocab(), expected[t]), 1e-4)
            << "fast decode, " << t;
      }
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        const std::vector<double> c(canonical.begin() + t * ref.vocab(),
                                    canonical.begin() + (t + 1) * ref.vocab());
        EXPECT_LE(rel_l2(got.data() + t * ref.vocab(), c), 1e-4) << "fast vs canonical, " << t;
      }
    }
    ASSERT_EQ(got.size(), tokens.size() * static_cast<std::size_t>(ref.vocab()));
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      const double err = rel_l2(got.data() + t * ref.vocab(), expected[t]);
      max_err[static_cast<int>(mode)] = std::max(max_err[static_cast<int>(mode)], err);
      EXPECT_LE(err, 1e-4) << "mode " << static_cast<int>(mode) << " position " << t;
    }
  }
  RecordProperty("max_rel_l2_canonical", std::to_string(max_err[0]));
  RecordProperty("max_rel_l2_fast", std::to_string(max_err[1]));
  EXPECT_GT(max_err[0], 0.0);  // a float32 pass cannot match float64 exactly
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (devtools::TinyArch a :
       {devtools::TinyArch::kLlama, devtools::TinyArch::kMistral, devtools::TinyArch::kQwen2,
        devtools::TinyArch::kQwen3, devtools::TinyArch::kOlmo2, devtools::TinyArch::kPhi3,
        devtools::TinyArch::kQwen3Moe, devtools::TinyArch::kMixtral,
        devtools::TinyArch::kQwen2Moe}) {
    for (core::DType d : {core::DType::kF32, core::DType::kBF16, core::DType::kF16})
      v.push_back({a, d});
  }
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* const kDtype[] = {"f32", "bf16", "f16"};
  return std::string(devtools::tiny_arch_name(info.param.arch)) + "_" +
         kDtype[static_cast<int>(info.param.dtype)];
}

INSTANTIATE_TEST_SUITE_P(AllArchsAndDtypes, ForwardVsReference, ::testing::ValuesIn(all_cases()),
                         case_name);

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CanonicalInvariance : public ::testing::TestWithParam<devtools::TinyArch> {};

TEST_P(CanonicalInvariance, ChunkingDecodeBatchingAndThreadsGiveTheSameBits) {
  const std::string dir = scratch_dir("inv");
  devtools::TinyModelOptions o = tiny_options(GetParam(), core::DType::kBF16, dir, 3);
  devtools::make_tiny_model(o);
  const auto tokens = test_tokens(80, o.vocab, 1);
  auto model = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
  Runner runner(*model);
  const std::vector<float> prefill = runner.run_chunked(tokens, tokens.size());
  for (std::size_t chunk : {1, 5, 16, 64}) {
    EXPECT_TRUE(same_bits(prefill, runner.run_chunked(tokens, chunk))) << "chunk " << chunk;
  }
  // Batched with two other sequences of different lengths and chunkings.
  const auto other1 = test_tokens(37, o.vocab, 2);
  const auto other2 = test_tokens(5, o.vocab, 3);
  const auto batched = runner.run_batched({other1, tokens, other2}, {7, 9, 2});
  EXPECT_TRUE(same_bits(prefill, batched[1]));
  EXPECT_TRUE(same_bits(runner.run_chunked(other1, other1.size()), batched[0]));
  EXPECT_TRUE(same_bits(runner.run_chunked(other2, other2.size()), batched[2]));
  // Other block sizes change only where K/V live, not the numbers.
  auto model_b = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
  Runner runner_b(*model_b, 4);
  EXPECT_TRUE(same_bits(prefill, runner_b.run_chunked(tokens, 16)));
  for (int threads : {2, 4}) {
    auto mt = model::Model::load(dir, {NumericsMode::kCanonical, threads, {}});
    Runner r(*mt);
    EXPECT_TRUE(same_bits(prefill, r.run_chunked(tokens, tokens.size()))) << threads << " threads";
    EXPECT_TRUE(same_bits(prefill, r.run_chunked(tokens, 5))) << threads << " threads, chunk 5";
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchs, CanonicalInvariance,
                         ::testing::Values(devtools::TinyArch::kLlama, devtools::TinyArch::kMistral,
                                           devtools::TinyArch::kQwen2, devtools::TinyArch::kQwen3,
                                           devtools::TinyArch::kOlmo2, devtools::TinyArch::kPhi3,
                                           devtools::TinyArch::kQwen3Moe,
                                           devtools::TinyArch::kMixtral,
                                           devtools::TinyArch::kQwen2Moe));

TEST(Forward, LastRowOnlyMatchesAllLogits) {
  const std::string dir = scratch_dir("last");
  devtools::make_tiny_model(tiny_options(devtools::TinyArch::kLlama, core::DType::kF32, dir));
  auto model = model::Model::load(dir, {});
  model::KvCachePool kv(model->config(), 16, 1 << 20);
  model::SequenceStep st;
  st.tokens = test_tokens(20, 512);
  st.block_table = {kv.allocate(), kv.allocate()};
  std::vector<float> last;
  model->forward({st}, kv, last);
  ASSERT_EQ(last.size(), 512u);
  st.all_logits = true;
  std::vector<float> all;
  model->forward({st}, kv, all);
  ASSERT_EQ(all.size(), 20u * 512u);
  EXPECT_EQ(0, std::memcmp(last.data(), all.data() + 19 * 512, 512 * sizeof(float)));
}

TEST(Forward, RejectsBadSteps) {
  const std::string dir = scratch_dir("bad");
  devtools::TinyModelOptions o = tiny_options(devtools::TinyArch::kMistral, core::DType::kF32, dir);
  o.max_positions = 32;
  devtools::make_tiny_model(o);
  auto model = model::Model::load(dir, {});
  EXPECT_EQ(model->config().max_position_embeddings, 32);
  model::KvCachePool kv(model->config(), 16, 1 << 20);
  auto expect_invalid = [&](model::SequenceStep st) {
    std::vector<float> logits;
    try {
      model->forward({st}, kv, logits);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  };
  model::SequenceStep ok;
  ok.tokens = {1, 2, 3};
  ok.block_table = {kv.allocate(), kv.allocate(), kv.allocate()};
  model::SequenceStep s = ok;
  s.tokens = {512};
  expect_invalid(s);
  s = ok;
  s.tokens = {};
  expect_invalid(s);
  s = ok;
  s.start_pos = 30;  // 30..32 runs past the context
  expect_invalid(s);
  s = ok;
  s.block_table = {};
  expect_invalid(s);
  s = ok;
  s.block_table = {100000};
  expect_invalid(s);
  std::vector<float> logits;
  model->forward({ok}, kv, logits);
  EXPECT_EQ(logits.size(), 512u);
}

}  // namespace
}  // namespace detinfer
