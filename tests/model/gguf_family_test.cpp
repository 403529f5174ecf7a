// GGUF files of the Gemma 2 / Gemma 3 and mixture-of-experts families (docs/gguf.md), as
// llama.cpp's converter writes them: each tiny folder written as GGUF (f32 and bf16) loads
// with the folder's config and bitwise the folder's logits; quantized files equal the folder
// quantized on load with the same scheme; the tensors are where and what llama.cpp puts
// there (Gemma's norms stored as 1 + w, the experts stacked, each expert a view of its rows).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <ostream>

#include "gguf_model_util.h"
#include "kernels/kernels.h"
#include "model/gguf_model.h"
#include "model/quant_scheme.h"
#include "model/tensor_store.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

using devtools::TinyArch;
using Edit = std::function<void(devtools::TinyModelOptions&)>;

// A tiny folder of `arch` (tiny_options, then `edit`) and its GGUF written with `g`.
testing::TinyGguf family_gguf(TinyArch arch, core::DType dtype, const std::string& name,
                              const Edit& edit = {}, const devtools::GgufConvertOptions& g = {}) {
  const std::string dir = testing::scratch_dir(name);
  devtools::TinyModelOptions o = testing::tiny_options(arch, dtype, dir + "/hf", 5);
  if (edit) edit(o);
  devtools::make_tiny_model(o);
  testing::TinyGguf t;
  t.hf_dir = o.out_dir;
  t.files = devtools::write_gguf_model(t.hf_dir, dir + "/m.gguf", g);
  t.gguf = t.files.front();
  return t;
}

struct Case {
  const char* name;
  TinyArch arch;
  core::DType dtype;
  Edit edit;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GgufFamily : public ::testing::TestWithParam<Case> {};

TEST_P(GgufFamily, ConfigAndLogitsEqualTheFolder) {
  const Case& c = GetParam();
  testing::expect_same_model(family_gguf(c.arch, c.dtype, std::string("gf-") + c.name, c.edit));
}

const Case kCases[] = {
    {"gemma2_f32", TinyArch::kGemma2, core::DType::kF32, {}},
    {"gemma2_bf16", TinyArch::kGemma2, core::DType::kBF16, {}},
    // Windowed every other layer (period 2: the pattern key), local base 10000.
    {"gemma3_f32", TinyArch::kGemma3, core::DType::kF32, {}},
    // Period 3, a local base of its own (rope.freq_base_swa), linear scaling on the global
    // layers only, untied.
    {"gemma3_bf16", TinyArch::kGemma3, core::DType::kBF16,
     [](devtools::TinyModelOptions& o) {
       o.layers = 3;
       o.sliding_window_pattern = 3;
       o.rope_local_base_freq = 20000.0;
       o.linear_rope_factor = 2.0;
       o.tie_word_embeddings = false;
     }},
    // llama.cpp's assumed period 6 (no pattern key), 7 layers.
    {"gemma3_period6", TinyArch::kGemma3, core::DType::kF32,
     [](devtools::TinyModelOptions& o) {
       o.layers = 7;
       o.sliding_window_pattern = 6;
     }},
    // A dense layer (mlp_only_layers) beside a sparse one.
    {"qwen3moe_f32", TinyArch::kQwen3Moe, core::DType::kF32,
     [](devtools::TinyModelOptions& o) { o.mlp_only_layers = {1}; }},
    // Top-k weights not renormalized: expert_weights_norm = false.
    {"qwen3moe_bf16", TinyArch::kQwen3Moe, core::DType::kBF16,
     [](devtools::TinyModelOptions& o) { o.norm_topk_prob = false; }},
    {"mixtral_f32", TinyArch::kMixtral, core::DType::kF32, {}},
    {"mixtral_bf16", TinyArch::kMixtral, core::DType::kBF16, {}},
    {"qwen2moe_f32", TinyArch::kQwen2Moe, core::DType::kF32, {}},
    {"qwen2moe_bf16", TinyArch::kQwen2Moe, core::DType::kBF16,
     [](devtools::TinyModelOptions& o) { o.norm_topk_prob = true; }},
};

INSTANTIATE_TEST_SUITE_P(Archs, GgufFamily, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The f32 bits of the folder tensor `hf` (widened) and of the GGUF tensor `g` (F32).
std::vector<float> folder_f32(const TensorStore& store, const std::string& hf) {
  const TensorRef& r = store.get(hf);
  const std::int64_t n =
      static_cast<std::int64_t>(r.info->size() / core::dtype_size(r.info->dtype));
  std::vector<float> out(static_cast<std::size_t>(n));
  widen_to_f32(r.info->dtype, r.data(), n, out.data());
  return out;
}

void expect_plus_one(const TensorStore& store, const GgufModel& m, const std::string& hf,
                     const std::string& g, core::DType dtype) {
  std::vector<float> w = folder_f32(store, hf);
  const auto [t, file] = m.find(g);
  ASSERT_NE(t, nullptr) << g;
  ASSERT_EQ(t->type, static_cast<std::uint32_t>(GgmlType::kF32)) << g;
  ASSERT_EQ(t->bytes, w.size() * sizeof(float)) << g;
  for (float& x : w) {
    x = 1.0f + x;
    if (dtype == core::DType::kF16) x = kernels::f16_to_f32(kernels::f32_to_f16_rne(x));
  }
  EXPECT_EQ(std::memcmp(m.data(g), w.data(), t->bytes), 0) << g;
}

// llama.cpp's names and keys; every norm stored as 1 + w in f32 (added after widening bf16,
// so exactly the factor detinfer applies); f16 folders: 1 + w rounded to f16, as the
// converter does in the tensor's type (that file is not bitwise the f16 folder).
TEST(GgufFamilyLayout, GemmaNamesKeysAndPlusOneNorms) {
  for (const core::DType dtype : {core::DType::kBF16, core::DType::kF16}) {
    const auto t = family_gguf(TinyArch::kGemma3, dtype, "gf-gemma-layout");
    const auto m = GgufModel::open(t.gguf);
    const TensorStore store = TensorStore::open(t.hf_dir);
    const std::string l = "model.layers.1.";
    for (const auto& [hf, g] :
         {std::pair<std::string, std::string>{l + "input_layernorm.weight",
                                              "blk.1.attn_norm.weight"},
          {l + "post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
          {l + "pre_feedforward_layernorm.weight", "blk.1.ffn_norm.weight"},
          {l + "post_feedforward_layernorm.weight", "blk.1.post_ffw_norm.weight"},
          {l + "self_attn.q_norm.weight", "blk.1.attn_q_norm.weight"},
          {l + "self_attn.k_norm.weight", "blk.1.attn_k_norm.weight"},
          {"model.norm.weight", "output_norm.weight"}}) {
      expect_plus_one(store, *m, hf, g, dtype);
    }
    EXPECT_EQ(m->find("output.weight").first, nullptr);  // tied
    EXPECT_EQ(m->metadata().get_uint("gemma3.attention.sliding_window"), 8u);
    EXPECT_EQ(m->metadata().get_uint("gemma3.attention.sliding_window_pattern"), 2u);
    EXPECT_EQ(m->metadata().get_uint("gemma3.attention.key_length"), 16u);
    EXPECT_EQ(m->metadata().find("gemma3.rope.freq_base_swa"), nullptr);  // the assumed 10000
    EXPECT_NO_THROW(testing::logits_of(t.gguf, 4));
  }
  const auto g2 = family_gguf(TinyArch::kGemma2, core::DType::kF32, "gf-gemma2-layout");
  const auto m2 = GgufModel::open(g2.gguf);
  EXPECT_EQ(m2->metadata().get_float("gemma2.attn_logit_softcapping"), 50.0);
  EXPECT_EQ(m2->metadata().get_float("gemma2.final_logit_softcapping"), 30.0);
  EXPECT_EQ(m2->metadata().find("gemma2.attention.sliding_window_pattern"), nullptr);
  const ModelConfig c = testing::config_of(g2.gguf);
  EXPECT_EQ(c.sliding_layers, (std::vector<std::uint8_t>{1, 0}));
  EXPECT_EQ(c.query_pre_attn_scalar, 16.0);  // key_length, as llama.cpp derives it
}

// Qwen2-MoE: the stacked experts [cols, rows, experts] in the folder's type, the routers and
// the squeezed shared-expert gate in F32; each expert a view of its rows of the mapping.
TEST(GgufFamilyLayout, ExpertsAreStackedAndMappedAsViews) {
  const auto t = family_gguf(TinyArch::kQwen2Moe, core::DType::kBF16, "gf-moe-layout");
  const auto m = GgufModel::open(t.gguf);
  const auto dims = [&](const char* n) { return m->find(n).first->dims; };
  const auto type = [&](const char* n) { return m->find(n).first->type; };
  EXPECT_EQ(dims("blk.0.ffn_gate_exps.weight"), (std::vector<std::uint64_t>{64, 32, 8}));
  EXPECT_EQ(dims("blk.0.ffn_down_exps.weight"), (std::vector<std::uint64_t>{32, 64, 8}));
  EXPECT_EQ(dims("blk.0.ffn_gate_inp.weight"), (std::vector<std::uint64_t>{64, 8}));
  EXPECT_EQ(dims("blk.0.ffn_gate_inp_shexp.weight"), (std::vector<std::uint64_t>{64}));
  EXPECT_EQ(dims("blk.0.ffn_up_shexp.weight"), (std::vector<std::uint64_t>{64, 48}));
  EXPECT_EQ(type("blk.0.ffn_gate_exps.weight"), static_cast<std::uint32_t>(GgmlType::kBF16));
  EXPECT_EQ(type("blk.0.ffn_gate_inp.weight"), static_cast<std::uint32_t>(GgmlType::kF32));
  EXPECT_EQ(type("blk.0.ffn_gate_inp_shexp.weight"), static_cast<std::uint32_t>(GgmlType::kF32));
  const auto& f = m->metadata();
  EXPECT_EQ(f.get_uint("qwen2moe.expert_count"), 8u);
  EXPECT_EQ(f.get_uint("qwen2moe.expert_used_count"), 2u);
  EXPECT_EQ(f.get_uint("qwen2moe.expert_feed_forward_length"), 32u);
  EXPECT_EQ(f.get_uint("qwen2moe.expert_shared_feed_forward_length"), 48u);
  EXPECT_EQ(f.find("qwen2moe.expert_weights_norm"), nullptr);  // llama.cpp's default (false)

  const ModelConfig c = testing::config_of(t.gguf);
  const GgufSource src(*m, c);
  const TensorStore store = TensorStore::open(t.hf_dir);
  const char* stacked = "blk.1.ffn_up_exps.weight";
  const std::uint64_t each = m->find(stacked).first->bytes / 8;
  for (const WeightSpec& s : required_weights(c)) {
    if (s.kind != WeightKind::kExpertUp || s.layer != 1) continue;
    const SourceTensor* v = src.find(s);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->data(), m->data(stacked) + each * static_cast<std::uint64_t>(s.expert));
    EXPECT_EQ(v->bytes, each);
    EXPECT_EQ(std::memcmp(v->data(), store.get(s.name).data(), each), 0) << s.name;
  }
}

// Older Mixtral files hold one 2-D tensor per expert (blk.N.ffn_gate.E.weight): the same
// model.
TEST(GgufFamilyLayout, PerExpertMixtralTensorsLoad) {
  const auto t = family_gguf(TinyArch::kMixtral, core::DType::kF32, "gf-mixtral-legacy");
  const std::string legacy = testing::edited(
      t.gguf, testing::tensor_edit([](auto& ts) {
        std::vector<testing::GgufTensorCopy> out;
        for (auto& x : ts) {
          const std::size_t at = x.name.find("_exps.weight");
          if (at == std::string::npos) {
            out.push_back(std::move(x));
            continue;
          }
          const std::size_t each = x.data.size() / x.dims[2];
          for (std::uint64_t e = 0; e < x.dims[2]; ++e) {
            testing::GgufTensorCopy one{x.name.substr(0, at) + "." + std::to_string(e) + ".weight",
                                        {x.dims[0], x.dims[1]},
                                        x.type,
                                        {}};
            one.data.assign(x.data.begin() + static_cast<std::ptrdiff_t>(e * each),
                            x.data.begin() + static_cast<std::ptrdiff_t>((e + 1) * each));
            out.push_back(std::move(one));
          }
        }
        ts = std::move(out);
      }),
      "gf-mixtral-legacy-copy");
  ASSERT_NE(GgufModel::open(legacy)->find("blk.0.ffn_gate.7.weight").first, nullptr);
  EXPECT_EQ(testing::logits_of(legacy, 24), testing::logits_of(t.hf_dir, 24));
}

// Quantized files (a single format and a K-quant mix, whose K formats fall back to Q5_0 /
// Q8_0 on these 32-wide rows, as llama.cpp's do): bitwise the folder quantized on load.
TEST(GgufFamilyQuantized, EqualsQuantizingTheFolderOnLoad) {
  struct QCase {
    TinyArch arch;
    core::DType dtype;
    const char* scheme;
  };
  for (const QCase& q : {QCase{TinyArch::kQwen3Moe, core::DType::kBF16, "q4_k_m"},
                         QCase{TinyArch::kGemma2, core::DType::kF32, "q8_0"}}) {
    QuantScheme s;
    ASSERT_TRUE(parse_quant_scheme(q.scheme, &s)) << q.scheme;
    devtools::GgufConvertOptions g;
    g.quantize = s;
    g.quantize_token_embd = q.arch == TinyArch::kGemma2;  // tied: quantized on load too
    const auto t = family_gguf(
        q.arch, q.dtype, std::string("gf-quant-") + q.scheme,
        [](devtools::TinyModelOptions& o) { o.mlp_only_layers = {1}; }, g);
    EXPECT_EQ(GgufModel::open(t.gguf)->find("blk.0.ffn_down_exps.weight").first != nullptr,
              q.arch == TinyArch::kQwen3Moe);
    devtools::LogitsRequest folder, file;
    folder.model_dir = t.hf_dir;
    file.model_dir = t.gguf;
    folder.tokens = file.tokens = testing::test_tokens(24, 512);
    folder.weights = s;
    const std::vector<float> a = devtools::compute_logits(folder).logits;
    const std::vector<float> b = devtools::compute_logits(file).logits;
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << q.scheme;
  }
}

}  // namespace
}  // namespace detinfer::model
