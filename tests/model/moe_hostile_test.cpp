// Mixture of experts: hostile configs (zero experts, top-k 0 or above the expert count,
// mlp_only_layers out of range, shared experts) and files (missing or misshapen expert and
// router tensors) are clear errors naming the field or tensor; the canonical config text gains the
// MoE lines for MoE architectures only.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "model/hostile_model.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_test_util.h"

namespace detinfer::model {
namespace {

using nlohmann::json;

std::string moe_dir(devtools::TinyArch arch, const std::string& name) {
  const std::string dir = testing::scratch_dir("moe-hostile-" + name);
  devtools::make_tiny_model(testing::tiny_options(arch, core::DType::kF32, dir, 4));
  return dir;
}

ErrorCode qwen_error(const std::function<void(json&)>& edit, const std::string& field) {
  return testing::config_error(moe_dir(devtools::TinyArch::kQwen3Moe, "cfg"), edit, field);
}

ErrorCode mixtral_error(const std::function<void(json&)>& edit, const std::string& field) {
  return testing::config_error(moe_dir(devtools::TinyArch::kMixtral, "cfg"), edit, field);
}

TEST(MoeHostile, ConfigsAreClearErrors) {
  EXPECT_EQ(qwen_error([](json& c) { c["num_experts"] = 0; }, "num_experts"), ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["num_experts_per_tok"] = 0; }, "num_experts_per_tok"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["num_experts_per_tok"] = 9; }, "num_experts_per_tok"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["moe_intermediate_size"] = 0; }, "moe_intermediate_size"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error(
                [](json& c) {
                  c["mlp_only_layers"] = {0, 2};
                },
                "mlp_only_layers[1]"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["mlp_only_layers"] = {-1}; }, "mlp_only_layers[0]"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["mlp_only_layers"] = "0"; }, "mlp_only_layers"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["decoder_sparse_step"] = 0; }, "decoder_sparse_step"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["num_experts"] = 2.5; }, "num_experts"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(qwen_error([](json& c) { c["shared_expert_intermediate_size"] = 64; },
                       "shared_expert_intermediate_size"),
            ErrorCode::kUnsupported);
  EXPECT_EQ(qwen_error([](json& c) { c["architectures"] = {"DeepseekV3ForCausalLM"}; },
                       "DeepseekV3ForCausalLM"),
            ErrorCode::kUnsupported);
  const std::string q2 = moe_dir(devtools::TinyArch::kQwen2Moe, "cfg2");
  EXPECT_EQ(testing::config_error(
                q2, [](json& c) { c["shared_expert_intermediate_size"] = 0; },
                "shared_expert_intermediate_size"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(mixtral_error([](json& c) { c["num_local_experts"] = 0; }, "num_local_experts"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(mixtral_error([](json& c) { c["num_experts_per_tok"] = 9; }, "num_experts_per_tok"),
            ErrorCode::kCorrupt);
  EXPECT_EQ(mixtral_error([](json& c) { c["num_experts_per_tok"] = -1; }, "num_experts_per_tok"),
            ErrorCode::kCorrupt);
}

TEST(MoeHostile, ConfigReadsTheHuggingFaceFields) {
  // Qwen3-MoE's layer rule: sparse where (l + 1) % decoder_sparse_step == 0 and l is not
  // in mlp_only_layers; Qwen3MoeConfig's defaults for absent fields.
  const std::string dir = moe_dir(devtools::TinyArch::kQwen3Moe, "fields");
  std::ifstream in(dir + "/config.json");
  json c = json::parse(in);
  c["decoder_sparse_step"] = 2;
  c["num_hidden_layers"] = 6;
  c["mlp_only_layers"] = {3};
  c.erase("norm_topk_prob");
  c.erase("moe_intermediate_size");
  const ModelConfig cfg = parse_model_config(c.dump(), "", "test");
  EXPECT_EQ(cfg.moe.sparse_layers, (std::vector<std::uint8_t>{0, 1, 0, 0, 0, 1}));
  EXPECT_FALSE(cfg.moe.norm_topk_prob);
  EXPECT_EQ(cfg.moe.intermediate_size, 768);
  // Mixtral: model_type alone, MixtralConfig's defaults (8 experts, top-2, eps 1e-5).
  json m = {{"model_type", "mixtral"},      {"vocab_size", 32},       {"hidden_size", 16},
            {"intermediate_size", 24},      {"num_hidden_layers", 2}, {"num_attention_heads", 2},
            {"max_position_embeddings", 64}};
  const ModelConfig mc = parse_model_config(m.dump(), "", "test");
  EXPECT_EQ(mc.architecture, Architecture::kMixtral);
  EXPECT_EQ(mc.moe.num_experts, 8);
  EXPECT_EQ(mc.moe.experts_per_tok, 2);
  EXPECT_EQ(mc.moe.intermediate_size, 24);
  EXPECT_EQ(mc.rms_norm_eps, 1e-5f);
  EXPECT_EQ(mc.rope_theta, 1e6);
  EXPECT_EQ(mc.moe.sparse_layers, (std::vector<std::uint8_t>{1, 1}));
}

Error load_error(devtools::TinyArch arch, const std::function<bool(devtools::TensorEntry&)>& edit) {
  return testing::load_error(moe_dir(arch, "weights"), edit);
}

void expect_names(const Error& e, ErrorCode code, const std::string& tensor) {
  EXPECT_EQ(e.code(), code) << e.message();
  EXPECT_NE(e.message().find(tensor), std::string::npos) << e.message();
}

TEST(MoeHostile, MissingOrMisshapenExpertsAreClearErrors) {
  const std::string up = "model.layers.1.mlp.experts.7.up_proj.weight";
  expect_names(load_error(devtools::TinyArch::kQwen3Moe,
                          [&](devtools::TensorEntry& t) { return t.name != up; }),
               ErrorCode::kNotFound, up);
  const std::string w2 = "model.layers.0.block_sparse_moe.experts.3.w2.weight";
  expect_names(load_error(devtools::TinyArch::kMixtral,
                          [&](devtools::TensorEntry& t) {
                            if (t.name == w2) t.shape = {48, 64};  // transposed
                            return true;
                          }),
               ErrorCode::kCorrupt, w2);
  const std::string router = "model.layers.1.block_sparse_moe.gate.weight";
  expect_names(load_error(devtools::TinyArch::kMixtral,
                          [&](devtools::TensorEntry& t) {
                            if (t.name == router) t.shape = {7, 64};  // one expert short
                            return true;
                          }),
               ErrorCode::kCorrupt, router);
  const std::string shared = "model.layers.1.mlp.shared_expert_gate.weight";
  expect_names(load_error(devtools::TinyArch::kQwen2Moe,
                          [&](devtools::TensorEntry& t) {
                            if (t.name == shared) t.shape = {64};  // 1-D
                            return true;
                          }),
               ErrorCode::kCorrupt, shared);
  // A dense checkpoint under a MoE config: the router is missing.
  const std::string qrouter = "model.layers.0.mlp.gate.weight";
  expect_names(load_error(devtools::TinyArch::kQwen3Moe,
                          [&](devtools::TensorEntry& t) { return t.name != qrouter; }),
               ErrorCode::kNotFound, qrouter);
}

TEST(MoeHostile, CanonicalConfigTextHasMoeLinesOnlyForMoe) {
  const ModelConfig q = load_model_config(moe_dir(devtools::TinyArch::kQwen3Moe, "text"));
  EXPECT_EQ(q.architecture, Architecture::kQwen3Moe);
  EXPECT_EQ(q.qk_norm, QkNorm::kPerHead);
  const std::string text = canonical_config_text(q);
  EXPECT_NE(text.find("qk_norm=1\nmoe_num_experts=8\nmoe_experts_per_tok=2\n"
                      "moe_intermediate_size=32\nmoe_norm_topk_prob=1\nmoe_sparse_layers=0,1\n"
                      "bos_token_ids="),
            std::string::npos)
      << text;
  const ModelConfig m = load_model_config(moe_dir(devtools::TinyArch::kMixtral, "text"));
  EXPECT_EQ(m.moe.intermediate_size, 48);
  EXPECT_TRUE(m.moe.norm_topk_prob);
  const ModelConfig dense = load_model_config(moe_dir(devtools::TinyArch::kQwen3, "text"));
  EXPECT_EQ(canonical_config_text(dense).find("moe_"), std::string::npos);
}

}  // namespace
}  // namespace detinfer::model
