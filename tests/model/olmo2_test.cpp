// OLMo 2 (Olmo2ForCausalLM; issue 29 item 4): norms after the attention and MLP outputs,
// q/k RMSNorm over the full projection width. A tiny random model (f32 weights) matches a
// float64 forward pass of transformers' semantics (reference_olmo2.h) within 1e-5
// relative L2 over 40 positions and is far from the same pass without the post-norms or
// with per-head q/k norms (so the test fails if either feature were dropped); canonical
// logits are bitwise invariant to chunking and threads; hostile configs and files are
// clear errors.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "model/hostile_model.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/reference_olmo2.h"

namespace detinfer::model {
namespace {

using nlohmann::json;
using testing::ReferenceOlmo2;

std::string olmo2_model(const std::string& name, std::uint64_t seed = 3) {
  const std::string dir = testing::scratch_dir("olmo2-" + name);
  devtools::make_tiny_model(
      testing::tiny_options(devtools::TinyArch::kOlmo2, core::DType::kF32, dir, seed));
  return dir;
}

// The worst relative L2 distance over the rows of `got` from the reference's rows.

TEST(Olmo2, FortyPositionsWithin1e5AndBothFeaturesMatter) {
  const std::string dir = olmo2_model("ref");
  const ReferenceOlmo2 ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab());
  const std::vector<float> got = testing::prefill_logits(dir, tokens, tokens.size());
  const double err = testing::worst_rel_l2(got, ref, tokens);
  RecordProperty("worst_rel_l2", std::to_string(err));
  EXPECT_LE(err, 1e-5);
  const double no_post = testing::worst_rel_l2(
      got, ReferenceOlmo2(dir, ReferenceOlmo2::Ablation::kNoPostNorms), tokens);
  RecordProperty("rel_l2_without_post_norms", std::to_string(no_post));
  EXPECT_GT(no_post, 1e-3) << "dropping the post-norms changes nothing";
  const double per_head = testing::worst_rel_l2(
      got, ReferenceOlmo2(dir, ReferenceOlmo2::Ablation::kPerHeadQkNorm), tokens);
  RecordProperty("rel_l2_per_head_qk_norm", std::to_string(per_head));
  EXPECT_GT(per_head, 1e-3) << "per-head q/k norm changes nothing";
  // Canonical bits do not depend on chunking or threads.
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 1), got) << "token by token";
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got) << "chunks of 7, 2 threads";
}

TEST(Olmo2, FastModeFollowsTheSameComposition) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "built without libtorch";
  const std::string dir = olmo2_model("fast");
  const ReferenceOlmo2 ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab(), 1);
  EXPECT_LE(testing::worst_rel_l2(testing::prefill_logits(dir, tokens, 9, 1, NumericsMode::kFast),
                                  ref, tokens),
            1e-4);
}

TEST(Olmo2, ConfigReadsTheHuggingFaceFields) {
  const std::string dir = olmo2_model("config");
  std::ifstream in(dir + "/config.json");
  json c = json::parse(in);
  c.erase("architectures");
  c.erase("rms_norm_eps");
  std::ofstream(dir + "/config.json") << c.dump();
  const ModelConfig cfg = load_model_config(dir);  // model_type "olmo2" alone
  EXPECT_EQ(cfg.architecture, Architecture::kOlmo2);
  EXPECT_EQ(cfg.qk_norm, QkNorm::kFullWidth);
  EXPECT_EQ(cfg.norm_placement, NormPlacement::kPost);
  EXPECT_EQ(cfg.rms_norm_eps, 1e-5f);  // Olmo2Config's default, not Llama's 1e-6
  const std::string text = canonical_config_text(cfg);
  EXPECT_NE(text.find("qk_norm=2\nnorm_placement=post\n"), std::string::npos) << text;
  // Other architectures' canonical texts (and so their fingerprints) are unchanged.
  const std::string qwen3 = testing::scratch_dir("olmo2-qwen3");
  devtools::make_tiny_model(
      testing::tiny_options(devtools::TinyArch::kQwen3, core::DType::kF32, qwen3));
  const std::string qtext = canonical_config_text(load_model_config(qwen3));
  EXPECT_NE(qtext.find("qk_norm=1\nbos_token_ids="), std::string::npos) << qtext;
}

ErrorCode config_error(const std::function<void(json&)>& edit, const std::string& field) {
  return testing::config_error(olmo2_model("hostile-config"), edit, field);
}

Error load_error(const std::function<bool(devtools::TensorEntry&)>& edit) {
  return testing::load_error(olmo2_model("hostile-weights"), edit);
}

TEST(Olmo2, UnsupportedConfigsAreClearErrors) {
  EXPECT_EQ(config_error([](json& c) { c["attention_bias"] = true; }, "attention_bias"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(config_error([](json& c) { c["hidden_act"] = "gelu"; }, "hidden_act"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(
      config_error([](json& c) { c["architectures"] = {"Olmo3ForCausalLM"}; }, "Olmo2ForCausalLM"),
      ErrorCode::kUnsupported);
}

TEST(Olmo2, WrongWidthOrMissingWeightsAreClearErrors) {
  // A per-head q_norm (Qwen3's [head_dim]) where OLMo 2 needs [num_heads * head_dim].
  const std::string q_norm = "model.layers.0.self_attn.q_norm.weight";
  Error e = load_error([&](devtools::TensorEntry& t) {
    if (t.name == q_norm) t.shape = {16};
    return true;
  });
  EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
  EXPECT_NE(e.message().find(q_norm), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("[64]"), std::string::npos) << e.message();
  // k_norm as wide as q_norm: GQA makes k narrower (2 KV heads of 16).
  const std::string k_norm = "model.layers.1.self_attn.k_norm.weight";
  e = load_error([&](devtools::TensorEntry& t) {
    if (t.name == k_norm) t.shape = {64};
    return true;
  });
  EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
  EXPECT_NE(e.message().find(k_norm), std::string::npos) << e.message();
  // A checkpoint without post_feedforward_layernorm (a pre-norm layout) is refused.
  const std::string post_ff = "model.layers.1.post_feedforward_layernorm.weight";
  e = load_error([&](devtools::TensorEntry& t) { return t.name != post_ff; });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_NE(e.message().find(post_ff), std::string::npos) << e.message();
}

}  // namespace
}  // namespace detinfer::model
