// config.json parsing for the four architectures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "model/model_config.h"
#include "model/rope_table.h"

namespace detinfer {
namespace {

using nlohmann::json;

json base(const char* arch) {
  return {{"architectures", {arch}},   {"hidden_size", 896},
          {"intermediate_size", 4864}, {"num_hidden_layers", 24},
          {"num_attention_heads", 14}, {"num_key_value_heads", 2},
          {"vocab_size", 151936},      {"max_position_embeddings", 32768},
          {"rms_norm_eps", 1e-6},      {"rope_theta", 1000000.0},
          {"hidden_act", "silu"},      {"tie_word_embeddings", true},
          {"bos_token_id", 151643},    {"eos_token_id", 151643}};
}

model::ModelConfig parse(const json& c, const json& gen = nullptr) {
  return model::parse_model_config(c.dump(), gen.is_null() ? "" : gen.dump(), "test/config.json");
}

ErrorCode code_of(const json& c) {
  try {
    parse(c);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("test/config.json"), std::string::npos) << e.message();
    return e.code();
  }
  ADD_FAILURE() << "accepted " << c.dump();
  return ErrorCode::kInternal;
}

TEST(ModelConfig, Qwen2HasBiasesAndGqa) {
  const model::ModelConfig c = parse(
      base("Qwen2ForCausalLM"), json{{"eos_token_id", {151645, 151643}}, {"bos_token_id", 151643}});
  EXPECT_EQ(c.architecture, model::Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.qk_norm, model::QkNorm::kNone);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids,
            (std::vector<std::int32_t>{151645, 151643}));  // generation_config wins
  EXPECT_EQ(c.bos_token_ids, (std::vector<std::int32_t>{151643}));
  EXPECT_EQ(c.rms_norm_eps, 1e-6f);
}

TEST(ModelConfig, Qwen3HasQkNormAndExplicitHeadDim) {
  json j = base("Qwen3ForCausalLM");
  j["head_dim"] = 128;
  const model::ModelConfig c = parse(j);
  EXPECT_EQ(c.qk_norm, model::QkNorm::kPerHead);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  j["attention_bias"] = true;
  EXPECT_EQ(code_of(j), ErrorCode::kUnsupported);
}

TEST(ModelConfig, LlamaRopeScaling) {
  json j = base("LlamaForCausalLM");
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  j["head_dim"] = 64;
  const model::ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  // Low frequencies are divided by the factor, high ones untouched.
  const model::RopeTable scaled(c);
  model::ModelConfig plain = c;
  plain.rope_scaling = model::RopeScaling{};
  const model::RopeTable unscaled(plain);
  EXPECT_EQ(scaled.inv_freq().front(), unscaled.inv_freq().front());
  EXPECT_DOUBLE_EQ(scaled.inv_freq().back(), unscaled.inv_freq().back() / 32.0);
  j["rope_scaling"] = {{"type", "su"}, {"factor", 4.0}};  // a type detinfer does not know
  EXPECT_EQ(code_of(j), ErrorCode::kUnsupported);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse(j).rope_scaling.type, "");
  j["rope_scaling"] = nullptr;
  j["attention_bias"] = true;
  EXPECT_EQ(code_of(j), ErrorCode::kUnsupported);
}

// Windows are masked exactly (issue 29), so they no longer cap the context; the canonical
// text keeps spec v1's capped value for these architectures (fingerprints unchanged).
TEST(ModelConfig, SlidingWindowsPerLayerNoLongerCapTheContext) {
  json j = base("MistralForCausalLM");
  j["sliding_window"] = 4096;
  EXPECT_EQ(parse(j).max_position_embeddings, 32768);
  EXPECT_EQ(parse(j).sliding_window, 4096);
  EXPECT_EQ(parse(j).sliding_layers, std::vector<std::uint8_t>(24, 1));  // every layer
  EXPECT_NE(model::canonical_config_text(parse(j)).find("max_position_embeddings=4096\n"),
            std::string::npos);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse(j).max_position_embeddings, 32768);
  EXPECT_TRUE(parse(j).sliding_layers.empty());
  // Qwen2 ignores sliding_window unless use_sliding_window is set; then layers >=
  // max_window_layers (default 28, so none of 24) slide, as transformers' layer_types.
  json q = base("Qwen2ForCausalLM");
  q["sliding_window"] = 1024;
  q["use_sliding_window"] = false;
  EXPECT_EQ(parse(q).sliding_window, 0);
  q["use_sliding_window"] = true;
  EXPECT_EQ(parse(q).sliding_window, 0);  // max_window_layers 28 >= 24 layers
  q["max_window_layers"] = 20;
  const model::ModelConfig c = parse(q);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  for (std::int64_t l = 0; l < 24; ++l) EXPECT_EQ(model::layer_is_sliding(c, l), l >= 20) << l;
  EXPECT_NE(model::canonical_config_text(c).find("sliding_layers=000000000000000000001111\n"),
            std::string::npos);
  q["layer_types"] = json::array();
  EXPECT_EQ(code_of(q), ErrorCode::kCorrupt);  // 0 entries for 24 layers
  q["sliding_window"] = 0;
  q.erase("layer_types");
  EXPECT_EQ(code_of(q), ErrorCode::kCorrupt);
}

TEST(ModelConfig, RejectsUnsupportedAndMalformed) {
  EXPECT_EQ(code_of(base("GPT2LMHeadModel")), ErrorCode::kUnsupported);
  json j = base("LlamaForCausalLM");
  j["hidden_act"] = "gelu";
  EXPECT_EQ(code_of(j), ErrorCode::kUnsupported);
  j = base("LlamaForCausalLM");
  j["quantization_config"] = {{"bits", 4}};
  EXPECT_EQ(code_of(j), ErrorCode::kUnsupported);
  j = base("LlamaForCausalLM");
  j.erase("hidden_size");
  EXPECT_EQ(code_of(j), ErrorCode::kCorrupt);
  j = base("LlamaForCausalLM");
  j["num_key_value_heads"] = 3;
  EXPECT_EQ(code_of(j), ErrorCode::kCorrupt);
  j = base("LlamaForCausalLM");
  j["vocab_size"] = -5;
  EXPECT_EQ(code_of(j), ErrorCode::kCorrupt);
  j = base("LlamaForCausalLM");
  j["eos_token_id"] = 999999;
  EXPECT_EQ(code_of(j), ErrorCode::kCorrupt);
  j = base("LlamaForCausalLM");
  j["rms_norm_eps"] = "small";
  EXPECT_EQ(code_of(j), ErrorCode::kCorrupt);
  EXPECT_THROW(model::parse_model_config("{oops", "", "x"), Error);
}

TEST(ModelConfig, CanonicalTextCoversComputationFields) {
  const model::ModelConfig a = parse(base("Qwen2ForCausalLM"));
  model::ModelConfig b = a;
  EXPECT_EQ(model::canonical_config_text(a), model::canonical_config_text(b));
  b.rope_theta = 10000.0;
  EXPECT_NE(model::canonical_config_text(a), model::canonical_config_text(b));
  b = a;
  b.rms_norm_eps = 1e-5f;
  EXPECT_NE(model::canonical_config_text(a), model::canonical_config_text(b));
}

}  // namespace
}  // namespace detinfer
