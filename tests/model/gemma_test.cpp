// Gemma 2 and Gemma 3 text (issue 29 items 1, 2): tiny random models (f32 weights) match a
// float64 forward pass of transformers' semantics (reference_gemma.h) within 1e-5 relative
// L2 over 40 positions with a window of 8, and are far from the same pass with each
// distinctive feature removed (the distances are recorded as test properties and printed);
// canonical logits are bitwise invariant to chunking and threads; fast mode (libtorch) is
// within 1e-4 of the same reference; hostile configs are clear errors naming the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "model/gemma_tiny.h"
#include "model/hostile_model.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/reference_gemma.h"

namespace detinfer::model {
namespace {

using nlohmann::json;
using testing::ReferenceGemma;
using Ablation = ReferenceGemma::Ablation;

std::string gemma_model(devtools::TinyArch arch, const std::string& name) {
  const std::string dir = testing::scratch_dir("gemma-" + name);
  devtools::make_tiny_model(testing::gemma_reference_options(arch, dir));
  return dir;
}

// The worst relative L2 of `got` from the reference with `a` removed; printed and recorded.
double distance(const std::vector<float>& got, const std::string& dir, Ablation a,
                const std::vector<std::int32_t>& tokens, const char* what) {
  const double d = testing::worst_rel_l2(got, ReferenceGemma(dir, a), tokens);
  std::printf("  %-28s worst rel L2 %.3e\n", what, d);
  ::testing::Test::RecordProperty(what, std::to_string(d));
  return d;
}

void check_family(devtools::TinyArch arch, const std::string& name,
                  const std::vector<std::pair<Ablation, const char*>>& ablations) {
  const std::string dir = gemma_model(arch, name);
  const ReferenceGemma ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab());
  const std::vector<float> got = testing::prefill_logits(dir, tokens, tokens.size());
  const double err = distance(got, dir, Ablation::kNone, tokens, "reference");
  EXPECT_LE(err, 1e-5);
  for (const auto& [a, what] : ablations) {
    EXPECT_GT(distance(got, dir, a, tokens, what), 1e-3) << what << " changes nothing";
  }
  // Canonical bits do not depend on chunking or threads.
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 1), got) << "token by token";
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got) << "chunks of 7, 2 threads";
}

TEST(Gemma2, FortyPositionsWithin1e5AndEveryFeatureMatters) {
  check_family(devtools::TinyArch::kGemma2, "2-ref",
               {{Ablation::kNoAttnSoftcap, "without_attn_softcap"},
                {Ablation::kNoFinalSoftcap, "without_final_softcap"},
                {Ablation::kNoPostNorms, "without_post_norms"},
                {Ablation::kPlainNormWeight, "norm_w_instead_of_1_plus_w"},
                {Ablation::kNoWindow, "without_window"},
                {Ablation::kNoEmbedScale, "without_embed_scale"}});
}

TEST(Gemma3, FortyPositionsWithin1e5AndEveryFeatureMatters) {
  check_family(devtools::TinyArch::kGemma3, "3-ref",
               {{Ablation::kNoPostNorms, "without_post_norms"},
                {Ablation::kPlainNormWeight, "norm_w_instead_of_1_plus_w"},
                {Ablation::kNoWindow, "without_window"},
                {Ablation::kNoEmbedScale, "without_embed_scale"},
                {Ablation::kNoLocalRope, "without_local_rope_base"}});
}

TEST(Gemma, ConfigReadsTheHuggingFaceFields) {
  const std::string dir = gemma_model(devtools::TinyArch::kGemma2, "config2");
  ModelConfig c = load_model_config(dir);
  EXPECT_EQ(c.architecture, Architecture::kGemma2);
  EXPECT_EQ(c.hidden_act, Activation::kGeluTanh);
  EXPECT_EQ(c.norm_placement, NormPlacement::kSandwich);
  EXPECT_TRUE(c.norm_plus_one && c.scale_embeddings);
  EXPECT_EQ(c.attn_logit_softcapping, 2.0);
  EXPECT_EQ(c.final_logit_softcapping, 3.0);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.sliding_layers, (std::vector<std::uint8_t>{1, 0}));  // even layers slide
  EXPECT_EQ(c.max_position_embeddings, 2048);  // the window no longer caps the context
  const std::string text = canonical_config_text(c);
  EXPECT_NE(text.find("sliding_layers=10\nhidden_act=gelu_pytorch_tanh\n"), std::string::npos)
      << text;
  const std::string dir3 = gemma_model(devtools::TinyArch::kGemma3, "config3");
  c = load_model_config(dir3);
  EXPECT_EQ(c.architecture, Architecture::kGemma3);
  EXPECT_EQ(c.qk_norm, QkNorm::kPerHead);
  EXPECT_EQ(c.attn_logit_softcapping, 0.0);  // null: none
  EXPECT_EQ(c.rope_local_theta, 100.0);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_EQ(c.sliding_layers, (std::vector<std::uint8_t>{1, 1, 0}));
  // layer_types wins over the pattern; model_type alone names the class.
  std::ifstream in(dir3 + "/config.json");
  json j = json::parse(in);
  j.erase("architectures");
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  c = parse_model_config(j.dump(), "", "gemma3");
  EXPECT_EQ(c.architecture, Architecture::kGemma3);
  EXPECT_EQ(c.sliding_layers, (std::vector<std::uint8_t>{0, 1, 0}));
}

ErrorCode config_error(const std::function<void(json&)>& edit, const std::string& field) {
  return testing::config_error(gemma_model(devtools::TinyArch::kGemma2, "hostile"), edit, field);
}

TEST(Gemma, HostileConfigsAreClearErrors) {
  EXPECT_EQ(config_error([](json& c) { c["sliding_window"] = 0; }, "sliding_window"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(config_error([](json& c) { c["sliding_window"] = -4; }, "sliding_window"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(config_error([](json& c) { c["layer_types"] = {"sliding_attention"}; }, "layer_types"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(config_error(
                [](json& c) {
                  c["layer_types"] = {"sliding_attention", "chunked"};
                },
                "layer_types"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(config_error([](json& c) { c["hidden_activation"] = "gelu"; }, "hidden_activation"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(
      config_error([](json& c) { c["attn_logit_softcapping"] = 0.0; }, "attn_logit_softcapping"),
      ErrorCode::kCorrupt);
  EXPECT_EQ(config_error([](json& c) { c["final_logit_softcapping"] = -30.0; },
                         "final_logit_softcapping"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(
      config_error([](json& c) { c["query_pre_attn_scalar"] = 0.0; }, "query_pre_attn_scalar"),
      ErrorCode::kCorrupt);
  EXPECT_EQ(config_error([](json& c) { c["attention_bias"] = true; }, "attention_bias"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(testing::config_error(
                gemma_model(devtools::TinyArch::kGemma3, "hostile3"),
                [](json& c) { c["sliding_window_pattern"] = 0; }, "sliding_window_pattern"),
            ErrorCode::kCorrupt);
}

// Fast mode (libtorch) runs the same composition (soft-capping, sandwich norms, (1 + w),
// GeGLU, embedding scale, windows, Gemma 3's q/k norms and local RoPE base): within 1e-4
// of the float64 pass over 40 positions with a window of 8, in chunks of 9 and token by
// token (libtorch's one-row paths).
void check_fast(devtools::TinyArch arch, const std::string& name) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "no libtorch";
  const std::string dir = gemma_model(arch, name);
  const ReferenceGemma ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab(), 3);
  for (const std::size_t chunk : {std::size_t{9}, std::size_t{1}}) {
    const double err = testing::worst_rel_l2(
        testing::prefill_logits(dir, tokens, chunk, 1, NumericsMode::kFast), ref, tokens);
    std::printf("  fast, chunks of %zu: worst rel L2 %.3e\n", chunk, err);
    ::testing::Test::RecordProperty("fast_worst_rel_l2_chunk" + std::to_string(chunk),
                                    std::to_string(err));
    EXPECT_LE(err, 1e-4) << "chunks of " << chunk;
  }
}

TEST(Gemma2, FastModeWithin1e4) { check_fast(devtools::TinyArch::kGemma2, "2-fast"); }

TEST(Gemma3, FastModeWithin1e4) { check_fast(devtools::TinyArch::kGemma3, "3-fast"); }

}  // namespace
}  // namespace detinfer::model
