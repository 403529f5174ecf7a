// Phi-3 / Phi-4-mini (Phi3ForCausalLM; issue 29 item 3): fused qkv_proj and gate_up_proj,
// partial_rotary_factor, longrope with its attention factor. Tiny random models (f32
// weights) match a float64 forward pass of transformers' semantics (reference_phi3.h)
// within 1e-5 relative L2 over 40 positions and are far from the same pass without the
// partial rotary, with gate and up swapped, or without the longrope scaling (so the test
// fails if any were dropped); canonical logits are bitwise invariant to chunking and
// threads; hostile configs and files are clear errors.
#include <gtest/gtest.h>

#include <cmath>
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
#include "model/reference_phi3.h"
#include "model/rope_table.h"

namespace detinfer::model {
namespace {

using nlohmann::json;
using testing::ReferencePhi3;
using Ablation = ReferencePhi3::Ablation;

// A tiny Phi-3 (f32, head_dim 16, 2048 positions) with `partial` and, when not null,
// rope_scaling `scaling` (original_max_position_embeddings 512 then).
std::string phi3_model(const std::string& name, double partial, const json& scaling) {
  const std::string dir = testing::scratch_dir("phi3-" + name);
  devtools::TinyModelOptions o =
      testing::tiny_options(devtools::TinyArch::kPhi3, core::DType::kF32, dir, 5);
  o.partial_rotary_factor = partial;
  devtools::make_tiny_model(o);
  if (!scaling.is_null()) {
    std::ifstream in(dir + "/config.json");
    json c = json::parse(in);
    c["rope_scaling"] = scaling;
    c["original_max_position_embeddings"] = 512;
    std::ofstream(dir + "/config.json") << c.dump(2);
  }
  return dir;
}

// longrope factors for `pairs` rotated dimension pairs, as Phi-3.5 / Phi-4-mini write them.
json longrope(int pairs) {
  std::vector<double> s, l;
  for (int i = 0; i < pairs; ++i) {
    s.push_back(1.0 + 0.9 * i);
    l.push_back(20.0 + i);
  }
  return {{"type", "longrope"}, {"short_factor", s}, {"long_factor", l}};
}

struct Variant {
  const char* name;
  double partial;
  json scaling;
  std::vector<Ablation> ablations;  // each must move the reference > 1e-3 away
};

std::vector<Variant> variants() {
  return {
      // Phi-4-mini's shape of RoPE: 12 of 16 dims rotate; no scaling.
      {"partial", 0.75, nullptr, {Ablation::kFullRotary, Ablation::kSwappedGateUp}},
      // Phi-4-mini: partial rotary and longrope (6 factor pairs).
      {"partial_longrope", 0.75, longrope(6), {Ablation::kNoScaling}},
      // Phi-3.5-mini: every dimension rotates, longrope.
      {"longrope", 1.0, longrope(8), {Ablation::kNoScaling, Ablation::kSwappedGateUp}},
  };
}

class Phi3VsReference : public ::testing::TestWithParam<Variant> {};

TEST_P(Phi3VsReference, FortyPositionsWithin1e5AndEachFeatureMatters) {
  const Variant v = GetParam();
  const std::string dir = phi3_model(v.name, v.partial, v.scaling);
  const ReferencePhi3 ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab());
  const std::vector<float> got = testing::prefill_logits(dir, tokens, tokens.size());
  const double err = testing::worst_rel_l2(got, ref, tokens);
  RecordProperty("worst_rel_l2", std::to_string(err));
  EXPECT_LE(err, 1e-5) << v.name;
  for (const Ablation a : v.ablations) {
    const double away = testing::worst_rel_l2(got, ReferencePhi3(dir, a), tokens);
    RecordProperty("rel_l2_ablation_" + std::to_string(static_cast<int>(a)), std::to_string(away));
    EXPECT_GT(away, 1e-3) << v.name << ": ablation " << static_cast<int>(a) << " changes nothing";
  }
  // Canonical bits do not depend on chunking or threads.
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 1), got) << v.name << ": token by token";
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got)
      << v.name << ": chunks of 7, 2 threads";
  if (DETINFER_TEST_WITH_TORCH) {  // fast mode: the same composition through libtorch
    EXPECT_LE(testing::worst_rel_l2(testing::prefill_logits(dir, tokens, 9, 1, NumericsMode::kFast),
                                    ref, tokens),
              1e-4)
        << v.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Phi3VsReference, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

TEST(Phi3, ConfigReadsTheHuggingFaceFields) {
  const std::string dir = phi3_model("config", 0.75, longrope(6));
  std::ifstream in(dir + "/config.json");
  json c = json::parse(in);
  c.erase("architectures");
  c.erase("rms_norm_eps");
  c["rope_scaling"]["type"] = "su";  // the early Phi-3 name of longrope
  c["sliding_window"] = 300;
  std::ofstream(dir + "/config.json") << c.dump();
  const ModelConfig cfg = load_model_config(dir);  // model_type "phi3" alone
  EXPECT_EQ(cfg.architecture, Architecture::kPhi3);
  EXPECT_TRUE(cfg.fused_projections);
  EXPECT_EQ(cfg.partial_rotary_dim, 12);
  EXPECT_EQ(rope_dims(cfg), 12);
  EXPECT_EQ(cfg.rms_norm_eps, 1e-5f);  // Phi3Config's default
  EXPECT_EQ(cfg.rope_scaling.type, "longrope");
  EXPECT_EQ(cfg.rope_scaling.original_max_position_embeddings, 512);
  EXPECT_EQ(cfg.max_position_embeddings, 512);  // the sliding window no longer caps it
  EXPECT_EQ(cfg.sliding_window, 300);
  const RopeTable table(cfg);
  EXPECT_EQ(table.half(), 6);
  // The factor is max_position_embeddings / original (2048 / 512), not the capped context.
  EXPECT_DOUBLE_EQ(table.attention_factor(), std::sqrt(1.0 + std::log(4.0) / std::log(512.0)));
  EXPECT_NE(canonical_config_text(cfg).find("head_dim=16\npartial_rotary_dim=12\n"),
            std::string::npos);
}

ErrorCode config_error(const std::function<void(json&)>& edit, const std::string& field) {
  return testing::config_error(phi3_model("hostile-config", 0.75, longrope(6)), edit, field);
}

Error load_error(const std::function<bool(devtools::TensorEntry&)>& edit) {
  return testing::load_error(phi3_model("hostile-weights", 0.75, nullptr), edit);
}

TEST(Phi3, HostileConfigsAreClearErrors) {
  // head_dim / 2 factors where only 12 of 16 dims rotate.
  EXPECT_EQ(config_error([](json& c) { c["rope_scaling"] = longrope(8); }, "short_factor"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(config_error([](json& c) { c["partial_rotary_factor"] = 0.1; },  // 1 dimension
                         "partial_rotary_factor"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(
      config_error([](json& c) { c["partial_rotary_factor"] = 1.5; }, "partial_rotary_factor"),
      ErrorCode::kCorrupt);
  EXPECT_EQ(
      config_error([](json& c) { c["partial_rotary_factor"] = 0.0; }, "partial_rotary_factor"),
      ErrorCode::kCorrupt);
  // Phi3Config accepts only default and longrope.
  EXPECT_EQ(config_error(
                [](json& c) {
                  c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
                },
                "rope_scaling"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(config_error([](json& c) { c["sliding_window"] = 0; }, "sliding_window"),
            ErrorCode::kCorrupt);
  // Partial rotary stays refused for the architectures that do not implement it.
  EXPECT_EQ(config_error(
                [](json& c) {
                  c["architectures"] = {"LlamaForCausalLM"};
                  c.erase("rope_scaling");
                },
                "partial_rotary_factor"),
            ErrorCode::kUnsupported);
}

TEST(Phi3, WrongFusedShapesOrUnfusedWeightsAreClearErrors) {
  // qkv_proj as if K and V had as many heads as Q (4 + 4 + 4 heads of 16, not 4 + 2 + 2).
  const std::string qkv = "model.layers.0.self_attn.qkv_proj.weight";
  Error e = load_error([&](devtools::TensorEntry& t) {
    if (t.name == qkv) t.shape = {192, 64};
    return true;
  });
  EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
  EXPECT_NE(e.message().find(qkv), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("[128, 64]"), std::string::npos) << e.message();
  // gate_up_proj holding only one half.
  const std::string gate_up = "model.layers.1.mlp.gate_up_proj.weight";
  e = load_error([&](devtools::TensorEntry& t) {
    if (t.name == gate_up) t.shape = {128, 64};
    return true;
  });
  EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
  EXPECT_NE(e.message().find(gate_up), std::string::npos) << e.message();
  // No gate_up_proj at all (an unfused checkpoint under a Phi-3 config).
  e = load_error([&](devtools::TensorEntry& t) { return t.name != gate_up; });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_NE(e.message().find(gate_up), std::string::npos) << e.message();
}

}  // namespace
}  // namespace detinfer::model
