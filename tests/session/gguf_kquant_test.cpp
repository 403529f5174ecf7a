// GGUF files with Q4_1 / Q5_1 / K-quant tensors and llama.cpp's K-quant mixes (docs/gguf.md,
// "Quantization mixes"): each tensor gets the type llama.cpp's quantizer gives it; the file
// generates bit for bit what the folder generates with SessionOptions::weights of the same
// scheme (the same blocks: the on-load quantizer is the converter's); and a mixed file's
// outputs are identical across threads, prefill chunking, batch composition and ISA.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "kernels/kernels.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/quant_scheme.h"
#include "tiny_session.h"

namespace detinfer {
namespace {

struct Files {
  std::string hf;
  std::string gguf;
};

// A tiny model whose rows are whole K super-blocks (hidden 256, intermediate 512), written
// as a GGUF quantized with `scheme`.
Files kquant_pair(devtools::TinyArch arch, const std::string& scheme, bool tie,
                  std::int64_t layers = 2) {
  const std::string dir = testing::test_tmp_path("gguf-kquant-", scheme + (tie ? "-tied" : ""));
  std::filesystem::remove_all(dir);
  devtools::TinyModelOptions o;
  o.arch = arch;
  o.dtype = core::DType::kBF16;
  o.hidden = 256;
  o.intermediate = 512;
  o.layers = layers;
  o.seed = 11;
  o.tie_word_embeddings = tie;
  o.out_dir = dir + "/hf";
  devtools::make_tiny_model(o);
  devtools::GgufConvertOptions g;
  model::QuantScheme s;
  EXPECT_TRUE(model::parse_quant_scheme(scheme, &s)) << scheme;
  g.quantize = s;
  g.quantize_token_embd = tie;  // on load, an untied embedding stays as stored
  std::filesystem::create_directories(dir + "/gguf");
  return {o.out_dir, devtools::write_gguf_model(o.out_dir, dir + "/gguf/m.gguf", g).front()};
}

GenerationConfig sampled() {
  GenerationConfig g;
  g.max_new_tokens = 20;
  g.temperature = 0.8f;
  g.seed = 3;
  g.num_return_sequences = 2;
  g.logprobs = 3;
  g.ignore_eos = true;
  return g;
}

const std::vector<std::int32_t> kPrompt = {5, 17, 300, 42, 9, 77, 1, 260, 31, 8};

// The ggml type name of every tensor of a GGUF file.
std::map<std::string, std::uint32_t> tensor_types(const std::string& path) {
  std::map<std::string, std::uint32_t> out;
  const auto m = model::GgufModel::open(path);
  for (const auto& [name, t] : m->tensors()) out[name] = t.first->type;
  return out;
}

TEST(GgufKquant, EveryFormatAndMixEqualsQuantizingOnLoad) {
  struct Case {
    devtools::TinyArch arch;
    const char* scheme;
    bool tie;
  };
  for (const Case& c : {Case{devtools::TinyArch::kLlama, "q4_k_m", false},
                        Case{devtools::TinyArch::kQwen2, "q5_k_m", true},
                        Case{devtools::TinyArch::kQwen3, "q3_k_m", false},
                        Case{devtools::TinyArch::kLlama, "q4_k_s", true},
                        Case{devtools::TinyArch::kQwen2, "q5_k_s", false},
                        Case{devtools::TinyArch::kPhi3, "q6_k", false},
                        Case{devtools::TinyArch::kOlmo2, "q2_k", true},
                        Case{devtools::TinyArch::kQwen3, "q4_1", false},
                        Case{devtools::TinyArch::kLlama, "q5_1", false}}) {
    const std::string what = std::string(c.scheme) + " arch " +
                             std::to_string(static_cast<int>(c.arch)) + (c.tie ? " tied" : "");
    const Files f = kquant_pair(c.arch, c.scheme, c.tie);
    SessionOptions q;
    q.weights = c.scheme;
    DeterministicSession hf = DeterministicSession::open(f.hf, q);
    DeterministicSession gg = DeterministicSession::open(f.gguf);
    const GenerationResult a = hf.generate(kPrompt, sampled());
    const GenerationResult b = gg.generate(kPrompt, sampled());
    testing::expect_identical(a, b, what);
    EXPECT_EQ(nlohmann::json::parse(a.fingerprint_json)["numerics"].value("weight_format", ""),
              std::string(c.scheme) + "/qspec1")
        << what;
    // The GGUF records the formats its tensors hold.
    const std::string stored =
        nlohmann::json::parse(b.fingerprint_json)["numerics"].value("weight_format", "");
    EXPECT_NE(stored.find("/qspec1"), std::string::npos) << what << ": " << stored;
    // Not what the native weights give.
    DeterministicSession native = DeterministicSession::open(f.hf);
    EXPECT_NE(native.generate(kPrompt, sampled()).sequences[0].step_digests,
              b.sequences[0].step_digests)
        << what;
  }
}

// llama.cpp's Q4_K_M rule over 8 layers: output and attn_v / ffn_down of the layers
// use_more_bits picks (0, 3, 6, 7) are Q6_K, the rest Q4_K; Q3_K_M: attn_v Q5_K in layers
// 0-1, Q4_K after; attn_output and ffn_down Q4_K (ffn_down Q5_K in layers < 8/16 = none).
TEST(GgufKquant, MixesPickLlamaCppsTypePerTensor) {
  using model::GgmlType;
  const auto t = [](GgmlType g) { return static_cast<std::uint32_t>(g); };
  {
    const Files f = kquant_pair(devtools::TinyArch::kLlama, "q4_k_m", false, 8);
    const std::map<std::string, std::uint32_t> ty = tensor_types(f.gguf);
    EXPECT_EQ(ty.at("output.weight"), t(GgmlType::kQ6_K));
    EXPECT_EQ(ty.at("token_embd.weight"), t(GgmlType::kBF16));  // kept (quantize_token_embd)
    for (int l = 0; l < 8; ++l) {
      const bool more = l == 0 || l == 3 || l == 6 || l == 7;
      const std::string b = "blk." + std::to_string(l) + ".";
      EXPECT_EQ(ty.at(b + "attn_v.weight"), t(more ? GgmlType::kQ6_K : GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "ffn_down.weight"), t(more ? GgmlType::kQ6_K : GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "attn_q.weight"), t(GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "ffn_up.weight"), t(GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "attn_norm.weight"), t(GgmlType::kF32)) << l;
    }
  }
  {
    const Files f = kquant_pair(devtools::TinyArch::kQwen2, "q3_k_m", true, 8);
    const std::map<std::string, std::uint32_t> ty = tensor_types(f.gguf);
    EXPECT_EQ(ty.at("token_embd.weight"), t(GgmlType::kQ6_K));  // tied: it is the output
    EXPECT_EQ(ty.count("output.weight"), 0u);
    for (int l = 0; l < 8; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      EXPECT_EQ(ty.at(b + "attn_v.weight"), t(l < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "attn_output.weight"), t(GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "ffn_down.weight"), t(GgmlType::kQ4_K)) << l;
      EXPECT_EQ(ty.at(b + "ffn_gate.weight"), t(GgmlType::kQ3_K)) << l;
    }
  }
}

// Rows that are not whole super-blocks fall back as llama.cpp does: q4_k -> q5_0 (hidden 96).
TEST(GgufKquant, RowsNotWholeSuperBlocksFallBack) {
  model::QuantScheme s;
  ASSERT_TRUE(model::parse_quant_scheme("q4_k", &s));
  model::ModelConfig c;
  c.num_layers = 2;
  model::WeightSpec w{"model.layers.0.self_attn.q_proj.weight", model::WeightKind::kQ, 0, {96, 96}};
  EXPECT_EQ(model::scheme_format_for(s, w, c), kernels::QuantFormat::kQ5_0);
  w.shape = {96, 512};
  EXPECT_EQ(model::scheme_format_for(s, w, c), kernels::QuantFormat::kQ4_K);
  ASSERT_TRUE(model::parse_quant_scheme("q6_k", &s));
  w.shape = {96, 96};
  EXPECT_EQ(model::scheme_format_for(s, w, c), kernels::QuantFormat::kQ8_0);
  w.kind = model::WeightKind::kInputNorm;
  EXPECT_FALSE(model::scheme_format_for(s, w, c).has_value());
  EXPECT_FALSE(model::parse_quant_scheme("q4_k_l", &s));
  EXPECT_NE(model::quant_scheme_names().find("q4_k_m"), std::string::npos);
}

// A Q4_K_M file: identical outputs across threads, prefill chunking, batch composition and
// every ISA the CPU has.
TEST(GgufKquant, MixedFileIsInvariant) {
  const Files f = kquant_pair(devtools::TinyArch::kLlama, "q4_k_m", true, 3);
  SessionOptions base;
  DeterministicSession ref = DeterministicSession::open(f.gguf, base);
  const GenerationResult want = ref.generate(kPrompt, sampled());
  for (const int threads : {1, 2}) {
    for (const std::int32_t chunk : {1, 7, 64}) {
      SessionOptions o;
      o.threads = threads;
      o.prefill_chunk_tokens = chunk;
      o.max_batch = 4;
      DeterministicSession s = DeterministicSession::open(f.gguf, o);
      const std::string what =
          "threads " + std::to_string(threads) + " chunk " + std::to_string(chunk);
      testing::expect_identical(want, s.generate(kPrompt, sampled()), what);
    }
  }
  const kernels::Isa saved = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (!kernels::isa_supported(isa)) continue;  // the CPU lacks it: nothing to compare
    kernels::set_isa(isa);
    DeterministicSession s = DeterministicSession::open(f.gguf);
    testing::expect_identical(want, s.generate(kPrompt, sampled()), kernels::to_string(isa));
  }
  kernels::set_isa(saved);
}

}  // namespace
}  // namespace detinfer
