// Mixture of experts (Qwen3MoeForCausalLM, MixtralForCausalLM; issue 29 item 6): canonical
// routing (softmax, top-k with ties to the lowest expert index, norm_topk_prob, outputs
// combined in ascending expert index). Tiny random models (f32 weights) match a float64
// pass of transformers' semantics (reference_moe.h) within 1e-5 relative L2 over 40
// positions, and are far from the same pass with the routing rule changed (no
// renormalization, top-1, weights combined in the wrong order, the other tie rule on a
// router built to tie); logits are bitwise invariant to batch composition (batches that
// route to other experts), chunking and threads; hostile configs and files are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "devtools/safetensors_writer.h"
#include "model/hostile_model.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_test_util.h"
#include "model/moe_block.h"
#include "model/prefill_logits.h"
#include "model/quant_scheme.h"
#include "model/reference_moe.h"
#include "model/tensor_store.h"

namespace detinfer::model {
namespace {

using nlohmann::json;
using testing::ReferenceMoe;
using Ablation = ReferenceMoe::Ablation;

// A distance as a test property (3 significant digits, scientific).
std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

devtools::TinyModelOptions moe_options(devtools::TinyArch arch, const std::string& dir,
                                       std::uint64_t seed = 5) {
  devtools::TinyModelOptions o = testing::tiny_options(arch, core::DType::kF32, dir, seed);
  o.layers = 3;
  if (arch != devtools::TinyArch::kMixtral) o.mlp_only_layers = {1};  // one dense layer
  return o;
}

std::string moe_model(devtools::TinyArch arch, const std::string& name, std::uint64_t seed = 5) {
  const std::string dir = testing::scratch_dir("moe-" + name);
  devtools::make_tiny_model(moe_options(arch, dir, seed));
  return dir;
}

// Rewrites every f32 tensor of dir's model.safetensors whose name passes `edit` (which
// may change the values in place; returns whether it did).
void edit_weights(const std::string& dir,
                  const std::function<bool(const std::string&, std::vector<float>&)>& edit) {
  std::vector<devtools::TensorEntry> entries;
  std::vector<std::vector<float>> data;
  {
    const TensorStore store = TensorStore::open(dir);
    for (const auto& [name, ref] : store.tensors()) {
      ASSERT_EQ(ref.info->dtype, core::DType::kF32);
      std::vector<float> v(static_cast<std::size_t>(ref.info->numel()));
      std::memcpy(v.data(), ref.data(), v.size() * 4);
      edit(name, v);
      entries.push_back({name, ref.info->dtype, ref.info->shape});
      data.push_back(std::move(v));
    }
  }
  devtools::write_safetensors(dir + "/model.safetensors", entries,
                              [&](const devtools::TensorEntry& e, std::vector<std::uint8_t>& b) {
                                for (std::size_t i = 0; i < entries.size(); ++i) {
                                  if (entries[i].name != e.name) continue;
                                  b.resize(data[i].size() * 4);
                                  std::memcpy(b.data(), data[i].data(), b.size());
                                }
                              });
}

// The reference distance of the canonical logits, recorded as a test property; and the
// distances of the ablated references, each required to be far.
void expect_matches_and_ablations_matter(const std::string& dir,
                                         const std::vector<Ablation>& ablations,
                                         const std::vector<const char*>& names) {
  const ReferenceMoe ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab());
  const std::vector<float> got = testing::prefill_logits(dir, tokens, tokens.size());
  const double err = testing::worst_rel_l2(got, ref, tokens);
  ::testing::Test::RecordProperty("worst_rel_l2", sci(err));
  EXPECT_LE(err, 1e-5);
  EXPECT_GT(err, 0.0);
  for (std::size_t i = 0; i < ablations.size(); ++i) {
    const double d = testing::worst_rel_l2(got, ReferenceMoe(dir, ablations[i]), tokens);
    ::testing::Test::RecordProperty(std::string("rel_l2_") + names[i], sci(d));
    EXPECT_GT(d, 1e-3) << names[i] << " changes nothing";
  }
  // Canonical bits do not depend on chunking or threads.
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 1), got) << "token by token";
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got) << "chunks of 7, 2 threads";
}

TEST(Moe, Qwen3MoeFortyPositionsWithin1e5AndRoutingMatters) {
  expect_matches_and_ablations_matter(
      moe_model(devtools::TinyArch::kQwen3Moe, "qwen3-ref"),
      {Ablation::kNoNormTopk, Ablation::kTop1, Ablation::kReversedWeights},
      {"no_norm_topk_prob", "top1", "reversed_weights"});
}

TEST(Moe, MixtralFortyPositionsWithin1e5AndRoutingMatters) {
  expect_matches_and_ablations_matter(
      moe_model(devtools::TinyArch::kMixtral, "mixtral-ref"),
      {Ablation::kNoNormTopk, Ablation::kTop1, Ablation::kReversedWeights},
      {"no_norm_topk_prob", "top1", "reversed_weights"});
}

TEST(Moe, Qwen2MoeSharedExpertFortyPositionsWithin1e5) {
  expect_matches_and_ablations_matter(
      moe_model(devtools::TinyArch::kQwen2Moe, "qwen2-ref"),
      {Ablation::kNoSharedExpert, Ablation::kUngatedShared, Ablation::kTop1},
      {"no_shared_expert", "ungated_shared_expert", "top1"});
}

// sigmoid_f32 = 1 / (1 + exp_f32(-z)): within 3e-7 relative of the exact value
// over the range where it is neither 0 nor 1, and exactly 0 / 1 far out.
TEST(Moe, SharedExpertSigmoidAccuracy) {
  double worst = 0;
  for (float z = -80.0f; z <= 40.0f; z += 0.001953125f) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(z)));
    worst = std::max(worst, std::abs(sigmoid_f32(z) - want) / want);
  }
  RecordProperty("sigmoid_worst_rel_error", sci(worst));
  EXPECT_LE(worst, 3e-7);
  EXPECT_EQ(sigmoid_f32(0.0f), 0.5f);
  EXPECT_EQ(sigmoid_f32(200.0f), 1.0f);
  EXPECT_EQ(sigmoid_f32(-200.0f), 0.0f);
}

TEST(Moe, Qwen3MoeWithoutNormTopkProbMatches) {
  const std::string dir = testing::scratch_dir("moe-qwen3-nonorm");
  devtools::TinyModelOptions o = moe_options(devtools::TinyArch::kQwen3Moe, dir);
  o.norm_topk_prob = false;
  o.experts_per_tok = 3;
  devtools::make_tiny_model(o);
  const ReferenceMoe ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab(), 4);
  const std::vector<float> got = testing::prefill_logits(dir, tokens, 9);
  const double err = testing::worst_rel_l2(got, ref, tokens);
  RecordProperty("worst_rel_l2", sci(err));
  EXPECT_LE(err, 1e-5);
}

// Router rows built so that experts tie exactly: rows 2 and 5 equal r, row 0 is 2r, the
// others r / 2 (exact scalings: every logit is an exact multiple of r . h). With top-2,
// r . h > 0 ranks expert 0 first and ties 2 and 5 for the second place; r . h < 0 ties the
// five r / 2 experts for both places. The lowest index must win every tie.
std::string tied_router_model(devtools::TinyArch arch) {
  const std::string dir = moe_model(arch, "tie");
  edit_weights(dir, [](const std::string& name, std::vector<float>& v) {
    if (name.find("gate.weight") == std::string::npos || name.find("experts") != std::string::npos)
      return false;
    const std::size_t h = v.size() / 8;
    for (std::size_t e = 0; e < 8; ++e) {
      const float scale = e == 0 ? 2.0f : (e == 2 || e == 5) ? 1.0f : 0.5f;
      for (std::size_t i = 0; i < h; ++i) v[e * h + i] = scale * v[2 * h + i];
    }
    return true;
  });
  return dir;
}

TEST(Moe, ForcedTiesGoToTheLowestExpertIndex) {
  for (const auto arch : {devtools::TinyArch::kQwen3Moe, devtools::TinyArch::kMixtral}) {
    const std::string dir = tied_router_model(arch);
    const ReferenceMoe ref(dir);
    const auto tokens = testing::test_tokens(40, ref.vocab(), 2);
    const std::vector<float> got = testing::prefill_logits(dir, tokens, 40);
    const double err = testing::worst_rel_l2(got, ref, tokens);
    const double other =
        testing::worst_rel_l2(got, ReferenceMoe(dir, Ablation::kTieHighestIndex), tokens);
    RecordProperty(
        std::string("worst_rel_l2_") + (arch == devtools::TinyArch::kMixtral ? "mixtral" : "qwen3"),
        sci(err));
    RecordProperty(std::string("rel_l2_highest_index_wins_") +
                       (arch == devtools::TinyArch::kMixtral ? "mixtral" : "qwen3"),
                   sci(other));
    EXPECT_LE(err, 1e-5);
    EXPECT_GT(other, 1e-3) << "the tie rule changes nothing";
    EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got);
  }
}

// Fast mode (libtorch) composes the same block: routing by canonical mode's rule (route_row
// over libtorch's router logits), experts grouped by rows, Qwen2-MoE's gated shared expert.
// Within 1e-4 of the float64 pass over 40 positions, in chunks of 9 and token by token
// (libtorch's one-row paths), for each architecture and, on the router built to tie, with
// ties to the lowest expert index (the other rule is more than 1e-3 away, above).
TEST(Moe, FastModeWithin1e4OfTheReference) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "no libtorch";
  for (const auto arch : {devtools::TinyArch::kQwen3Moe, devtools::TinyArch::kMixtral,
                          devtools::TinyArch::kQwen2Moe}) {
    const std::string name = devtools::tiny_arch_name(arch);
    const std::string dir = moe_model(arch, "fast-" + name);
    const ReferenceMoe ref(dir);
    const auto tokens = testing::test_tokens(40, ref.vocab(), 6);
    for (const std::size_t chunk : {std::size_t{9}, std::size_t{1}}) {
      const double err = testing::worst_rel_l2(
          testing::prefill_logits(dir, tokens, chunk, 1, NumericsMode::kFast), ref, tokens);
      RecordProperty("fast_worst_rel_l2_" + name + "_chunk" + std::to_string(chunk), sci(err));
      EXPECT_LE(err, 1e-4) << name << ", chunks of " << chunk;
    }
  }
}

TEST(Moe, FastModeBreaksTiesToTheLowestExpertIndex) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "no libtorch";
  for (const auto arch : {devtools::TinyArch::kQwen3Moe, devtools::TinyArch::kMixtral}) {
    const std::string dir = tied_router_model(arch);
    const ReferenceMoe ref(dir);
    const auto tokens = testing::test_tokens(40, ref.vocab(), 2);
    const double err = testing::worst_rel_l2(
        testing::prefill_logits(dir, tokens, 9, 1, NumericsMode::kFast), ref, tokens);
    RecordProperty(std::string("fast_tie_worst_rel_l2_") + devtools::tiny_arch_name(arch),
                   sci(err));
    EXPECT_LE(err, 1e-4) << devtools::tiny_arch_name(arch) << " on the tied router";
  }
}

std::vector<std::int64_t> experts_of(const std::vector<ExpertRoute>& r) {
  std::vector<std::int64_t> e;
  for (const ExpertRoute& x : r) e.push_back(x.expert);
  return e;
}

TEST(Moe, RouteRowTiesNormalizationAndOrder) {
  std::vector<float> probs(5);
  std::vector<ExpertRoute> r(2);
  const float tied[] = {1.0f, 3.0f, 0.5f, 3.0f, 3.0f};
  route_row(tied, 5, 2, false, probs.data(), r.data());
  EXPECT_EQ(experts_of(r), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(r[0].weight, r[1].weight);
  std::vector<ExpertRoute> one(1);
  route_row(tied, 5, 1, true, probs.data(), one.data());
  EXPECT_EQ(one[0].expert, 1);
  EXPECT_EQ(one[0].weight, 1.0f);
  // Routes come in ascending expert index whatever the rank; the weights are p / (sum of
  // the chosen p in ascending index from +0).
  const float ranked[] = {0.1f, -2.0f, 0.7f, 2.5f, 1.0f};
  std::vector<ExpertRoute> three(3);
  route_row(ranked, 5, 3, true, probs.data(), three.data());
  EXPECT_EQ(experts_of(three), (std::vector<std::int64_t>{2, 3, 4}));
  const float s = (0.0f + probs[2]) + probs[3] + probs[4];
  EXPECT_EQ(three[0].weight, probs[2] / s);
  EXPECT_EQ(three[1].weight, probs[3] / s);
  EXPECT_EQ(three[2].weight, probs[4] / s);
  route_row(ranked, 5, 3, false, probs.data(), three.data());
  EXPECT_EQ(three[1].weight, probs[3]);
}

// Every sequence's logits from one prefill step holding all of `seqs` (in order).
std::vector<std::vector<float>> batched_logits(Model& m,
                                               const std::vector<std::vector<std::int32_t>>& seqs) {
  KvCachePool kv(m.config(), 16, std::int64_t{32} << 20);
  std::vector<SequenceStep> batch;
  for (const auto& s : seqs) {
    SequenceStep st;
    st.tokens = s;
    for (std::size_t b = 0; b < (s.size() + 15) / 16; ++b) st.block_table.push_back(kv.allocate());
    st.all_logits = true;
    batch.push_back(st);
  }
  std::vector<float> logits;
  m.forward(batch, kv, logits);
  std::vector<std::vector<float>> out;
  std::size_t at = 0;
  for (const auto& s : seqs) {
    const std::size_t n = s.size() * static_cast<std::size_t>(m.config().vocab_size);
    out.emplace_back(logits.begin() + at, logits.begin() + at + n);
    at += n;
  }
  return out;
}

// Rows per expert (all sparse layers) when the sequences are run, by the float64
// reference's routing: shows that a batch changes how busy each expert is.
std::vector<int> expert_rows(const std::string& dir,
                             const std::vector<std::vector<std::int32_t>>& seqs) {
  const ReferenceMoe ref(dir);
  for (const auto& s : seqs) ref.logits(s);
  return ref.expert_rows();
}

TEST(Moe, BatchCompositionDoesNotChangeASequencesBits) {
  for (const auto arch : {devtools::TinyArch::kQwen3Moe, devtools::TinyArch::kMixtral,
                          devtools::TinyArch::kQwen2Moe}) {
    const std::string dir = moe_model(arch, "batch", 11);
    const auto tokens = testing::test_tokens(23, 512, 9);
    for (const int threads : {1, 2}) {
      auto m = Model::load(dir, {NumericsMode::kCanonical, threads, {}});
      const std::vector<float> alone = batched_logits(*m, {tokens})[0];
      // Other sequences of various lengths (other tokens, so other experts get rows and
      // the experts this sequence uses get more rows), before and after it.
      const auto a = testing::test_tokens(31, 512, 21), b = testing::test_tokens(3, 512, 22);
      const auto c = testing::test_tokens(57, 512, 23);
      if (threads == 1) {
        EXPECT_NE(expert_rows(dir, {tokens}), expert_rows(dir, {a, tokens, b}));
      }
      EXPECT_EQ(batched_logits(*m, {a, tokens, b})[1], alone) << threads << " threads";
      EXPECT_EQ(batched_logits(*m, {tokens, c})[0], alone) << threads << " threads";
      EXPECT_EQ(batched_logits(*m, {c, a, b, tokens})[3], alone) << threads << " threads";
      // The same sequence twice in one step: each copy has the bits of the lone run.
      const auto twice = batched_logits(*m, {tokens, tokens});
      EXPECT_EQ(twice[0], alone);
      EXPECT_EQ(twice[1], alone);
      EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, threads), alone) << "chunks of 7";
    }
  }
}

TEST(Moe, QuantizedExpertsOnLoadAreInvariant) {
  const std::string dir = moe_model(devtools::TinyArch::kQwen3Moe, "q8");
  const auto tokens = testing::test_tokens(20, 512, 3);
  QuantScheme q8;
  ASSERT_TRUE(parse_quant_scheme("q8_0", &q8));
  auto run = [&](int threads, std::size_t chunk) {
    auto m = Model::load(dir, {NumericsMode::kCanonical, threads, {}, core::DType::kF32, q8});
    KvCachePool kv(m->config(), 16, std::int64_t{16} << 20);
    std::vector<float> out;
    SequenceStep s;
    s.block_table = {kv.allocate(), kv.allocate()};
    s.all_logits = true;
    for (std::size_t at = 0; at < tokens.size(); at += chunk) {
      s.tokens.assign(tokens.begin() + at, tokens.begin() + std::min(tokens.size(), at + chunk));
      s.start_pos = static_cast<std::int64_t>(at);
      m->forward({s}, kv, out);
    }
    return out;
  };
  const std::vector<float> got = run(1, tokens.size());
  EXPECT_EQ(run(2, 7), got);
  // The experts (and the other linears) are q8_0: the logits move, yet stay close (a
  // quantized router would flip more routes; it stays in its float type).
  const ReferenceMoe ref(dir);
  const double err = testing::worst_rel_l2(got, ref, tokens);
  RecordProperty("q8_0_worst_rel_l2", sci(err));
  EXPECT_GT(err, 1e-4);
  EXPECT_LE(err, 0.5);
}

// A decode step reads the router and k of the E experts of each sparse layer: the bytes
// of the others are left out of decode_read_bytes (the bench's read bound).
TEST(Moe, DecodeReadBytesCountOnlyRoutedExperts) {
  const std::string dir = testing::scratch_dir("moe-bytes");
  devtools::TinyModelOptions o = moe_options(devtools::TinyArch::kQwen3Moe, dir);
  o.moe_intermediate = 64;  // whole 64-column panels: packed bytes = stored bytes
  devtools::make_tiny_model(o);
  const auto top2 = Model::load(dir, {});
  std::ifstream in(dir + "/config.json");
  json c = json::parse(in);
  c["num_experts_per_tok"] = 8;  // every expert
  std::ofstream(dir + "/config.json") << c.dump();
  const auto all = Model::load(dir, {});
  EXPECT_EQ(all->resident_bytes(), top2->resident_bytes());
  // Two sparse layers (layer 1 is dense) of 8 experts of 3 x 64 x 64 f32 weights; top-2
  // leaves 6 of 8 unread.
  const std::int64_t experts = 8 * 3 * 64 * 64 * 4;
  EXPECT_EQ(all->decode_read_bytes() - top2->decode_read_bytes(), 2 * experts / 8 * 6);
}

}  // namespace
}  // namespace detinfer::model
