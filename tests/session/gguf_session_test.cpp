// A GGUF model through the session and the C API (docs/gguf.md): a .gguf path opens like a
// model folder, with the tokenizer, chat template and sampling defaults of its metadata,
// and generates the same tokens, texts, step digests and logprob bits as the same model's
// safetensors folder; a GGUF whose weights are Q8_0/Q4_0/Q5_0 generates what the folder
// generates with SessionOptions::weights of that format.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detinfer/c_api.h"
#include "detinfer/error.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "kernels/quant.h"
#include "tiny_session.h"

namespace detinfer {
namespace {

struct Pair {
  std::string hf;
  std::string gguf;
};

Pair tiny_pair(devtools::TinyArch arch, core::DType dtype, const std::string& name,
               devtools::GgufConvertOptions g = {}, bool tie = false) {
  const std::string dir = testing::test_tmp_path("gguf-session-", name);
  std::filesystem::remove_all(dir);
  devtools::TinyModelOptions o;
  o.arch = arch;
  o.dtype = dtype;
  o.seed = 7;
  o.tie_word_embeddings = tie;
  o.out_dir = dir + "/hf";
  devtools::make_tiny_model(o);
  std::filesystem::create_directories(dir + "/gguf");
  return {o.out_dir, devtools::write_gguf_model(o.out_dir, dir + "/gguf/tiny.gguf", g).front()};
}

GenerationConfig sampled(std::uint64_t seed) {
  GenerationConfig g;
  g.max_new_tokens = 24;
  g.temperature = 0.8f;
  g.seed = seed;
  g.num_return_sequences = 2;
  g.logprobs = 3;
  g.ignore_eos = true;
  return g;
}

TEST(GgufSession, GeneratesWhatTheSafetensorsFolderGenerates) {
  for (const auto arch :
       {devtools::TinyArch::kLlama, devtools::TinyArch::kQwen2, devtools::TinyArch::kQwen3,
        devtools::TinyArch::kOlmo2, devtools::TinyArch::kPhi3}) {
    const std::string what = "arch " + std::to_string(static_cast<int>(arch));
    const Pair p = tiny_pair(arch, core::DType::kBF16, std::to_string(static_cast<int>(arch)));
    DeterministicSession hf = DeterministicSession::open(p.hf);
    DeterministicSession gg = DeterministicSession::open(p.gguf);
    ASSERT_NE(gg.tokenizer(), nullptr) << what;
    const std::vector<std::int32_t> prompt = {5, 17, 300, 42, 9};
    for (const std::uint64_t seed : {1u, 2u}) {
      const GenerationResult a = hf.generate(prompt, sampled(seed));
      const GenerationResult b = gg.generate(prompt, sampled(seed));
      ASSERT_EQ(a.sequences.size(), 2u);
      EXPECT_EQ(a.sequences[0].tokens.size(), 24u);
      testing::expect_identical(a, b, what);
    }
    // Text prompts: the GGUF tokenizer gives the folder's ids and texts.
    const std::string text = "The quick brown fox, 12345 times <|im_end|> and again.";
    EXPECT_EQ(gg.tokenizer()->encode(text), hf.tokenizer()->encode(text)) << what;
    testing::expect_identical(hf.generate(text, sampled(3)), gg.generate(text, sampled(3)), what);
    // The chat template and what it renders, and the sampling defaults.
    const std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi there!"}};
    ChatTemplateOptions t;
    t.add_generation_prompt = true;
    EXPECT_EQ(gg.apply_chat_template(chat, t), hf.apply_chat_template(chat, t)) << what;
    EXPECT_EQ(gg.encode_chat(chat, t), hf.encode_chat(chat, t)) << what;
    const GenerationConfig dh = hf.default_generation_config();
    const GenerationConfig dg = gg.default_generation_config();
    EXPECT_EQ(dg.temperature, dh.temperature) << what;
    EXPECT_EQ(dg.top_p, dh.top_p) << what;
    EXPECT_EQ(dg.top_k, dh.top_k) << what;
  }
}

// Phi-3 with partial rotary (12 of 16 dims) and longrope (factors in the rope_factors
// tensors, attention factor > 1): the GGUF session generates the folder's bits.
TEST(GgufSession, Phi3LongropePartialRotaryGeneratesWhatTheFolderGenerates) {
  const std::string dir = testing::test_tmp_path("gguf-session-", "phi3-longrope");
  std::filesystem::remove_all(dir);
  devtools::TinyModelOptions o;
  o.arch = devtools::TinyArch::kPhi3;
  o.partial_rotary_factor = 0.75;
  o.seed = 9;
  o.out_dir = dir + "/hf";
  devtools::make_tiny_model(o);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(o.out_dir + "/config.json"));
  c["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", {1.0, 1.5, 2.0, 3.0, 4.5, 6.0}},
                       {"long_factor", {8.0, 9.0, 10.0, 12.0, 14.0, 16.0}}};
  c["original_max_position_embeddings"] = 512;
  std::ofstream(o.out_dir + "/config.json") << c.dump();
  const std::string gguf = devtools::write_gguf_model(o.out_dir, dir + "/m.gguf").front();
  DeterministicSession hf = DeterministicSession::open(o.out_dir);
  DeterministicSession gg = DeterministicSession::open(gguf);
  const std::vector<std::int32_t> prompt = {5, 17, 300, 42, 9, 77, 3};
  testing::expect_identical(hf.generate(prompt, sampled(4)), gg.generate(prompt, sampled(4)),
                            "phi3 longrope");
}

TEST(GgufSession, WithoutTokenizerMetadataPromptsAreTokenIds) {
  devtools::GgufConvertOptions g;
  g.tokenizer = false;
  const Pair p = tiny_pair(devtools::TinyArch::kQwen3, core::DType::kBF16, "notok", g);
  DeterministicSession hf = DeterministicSession::open(p.hf);
  DeterministicSession gg = DeterministicSession::open(p.gguf);
  EXPECT_EQ(gg.tokenizer(), nullptr);
  const std::vector<std::int32_t> prompt = {5, 17, 300, 42, 9};
  GenerationResult a = hf.generate(prompt, sampled(1));
  for (auto& s : a.sequences) s.text.clear();  // the text needs a tokenizer; nothing else does
  testing::expect_identical(a, gg.generate(prompt, sampled(1)), "no tokenizer");
  try {
    gg.generate("hello");
    ADD_FAILURE() << "a text prompt without a tokenizer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
}

// A GGUF file whose 2-D weights are stored quantized (by the quantizer SessionOptions::weights
// uses on load, so the blocks are the same) generates bit for bit what the folder generates
// with weights = that format: the tensors' blocks go to the quantized kernels as they are.
// llama: Q/K rows permuted in the file; qwen2: biases beside quantized projections; tied
// embeddings: token_embd quantized and serving as the lm_head.
TEST(GgufSession, QuantizedTensorsEqualQuantizingOnLoad) {
  struct Case {
    devtools::TinyArch arch;
    kernels::QuantFormat format;
    const char* name;
    bool tie;
  };
  for (const Case& c :
       {Case{devtools::TinyArch::kLlama, kernels::QuantFormat::kQ8_0, "q8_0", false},
        Case{devtools::TinyArch::kQwen2, kernels::QuantFormat::kQ4_0, "q4_0", true},
        Case{devtools::TinyArch::kQwen3, kernels::QuantFormat::kQ5_0, "q5_0", true},
        Case{devtools::TinyArch::kLlama, kernels::QuantFormat::kQ5_0, "q5_0", true},
        // OLMo 2's post norms; Phi-3's fused attn_qkv and ffn_up, quantized as stored.
        Case{devtools::TinyArch::kOlmo2, kernels::QuantFormat::kQ8_0, "q8_0", true},
        Case{devtools::TinyArch::kPhi3, kernels::QuantFormat::kQ4_0, "q4_0", false}}) {
    const std::string what = std::string(c.name) + " arch " +
                             std::to_string(static_cast<int>(c.arch)) + (c.tie ? " tied" : "");
    devtools::GgufConvertOptions g;
    g.quantize = c.format;
    g.quantize_token_embd = c.tie;  // on load, an untied embedding stays as stored
    const Pair p = tiny_pair(c.arch, core::DType::kBF16, what, g, c.tie);
    SessionOptions q;
    q.weights = c.name;
    DeterministicSession hf = DeterministicSession::open(p.hf, q);
    DeterministicSession gg = DeterministicSession::open(p.gguf);
    const std::vector<std::int32_t> prompt = {5, 17, 300, 42, 9, 77, 1, 260};
    const GenerationResult a = hf.generate(prompt, sampled(5));
    const GenerationResult b = gg.generate(prompt, sampled(5));
    testing::expect_identical(a, b, what);
    // Both runs record the quantized format and spec version (the GGUF's from its tensors).
    for (const GenerationResult* r : {&a, &b}) {
      const nlohmann::json fp = nlohmann::json::parse(r->fingerprint_json);
      EXPECT_EQ(fp["numerics"].value("weight_format", ""), std::string(c.name) + "/qspec1")
          << what << ": " << r->fingerprint_json;
    }
    // And not what the native weights give (the quantized blocks were used).
    DeterministicSession native = DeterministicSession::open(p.hf);
    EXPECT_NE(native.generate(prompt, sampled(5)).sequences[0].step_digests,
              gg.generate(prompt, sampled(5)).sequences[0].step_digests)
        << what;
  }
}

// llama.cpp quantizes token_embd too: an untied quantized embedding is dequantized exactly
// to f32 for the row lookups. Such a file loads and generates the same bits at any thread
// count and batch composition.
TEST(GgufSession, QuantizedEmbeddingTableIsInvariant) {
  devtools::GgufConvertOptions g;
  g.quantize = kernels::QuantFormat::kQ8_0;
  const Pair p = tiny_pair(devtools::TinyArch::kQwen3, core::DType::kF32, "q8embd", g);
  SessionOptions one, two;
  two.threads = 2;
  two.max_batch = 3;
  DeterministicSession a = DeterministicSession::open(p.gguf, one);
  DeterministicSession b = DeterministicSession::open(p.gguf, two);
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  testing::expect_identical(a.generate(prompt, sampled(9)), b.generate(prompt, sampled(9)),
                            "threads/batch");
}

// Quantized GGUF tensors need the canonical CPU kernels: elsewhere a clear kUnsupported
// naming the tensor and its type.
TEST(GgufSession, QuantizedTensorsOutsideCanonicalCpuAreRefused) {
  devtools::GgufConvertOptions g;
  g.quantize = kernels::QuantFormat::kQ8_0;
  const Pair p = tiny_pair(devtools::TinyArch::kQwen2, core::DType::kF32, "q8fast", g);
  SessionOptions fast;
  fast.mode = NumericsMode::kFast;
  try {
    DeterministicSession::open(p.gguf, fast);
    ADD_FAILURE() << "fast mode took Q8_0 tensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
#if DETINFER_TEST_WITH_TORCH  // without libtorch, fast mode itself is the refusal
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
    // The message lists every type canonical mode reads (K-quants included).
    EXPECT_NE(std::string(e.what()).find("Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K in canonical mode"),
              std::string::npos)
        << e.what();
#endif
  }
}

TEST(GgufSession, CApiOpensAGgufFile) {
  const Pair p = tiny_pair(devtools::TinyArch::kQwen3, core::DType::kF32, "capi");
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4};
  std::vector<std::vector<std::int32_t>> out;
  for (const std::string& path : {p.hf, p.gguf}) {
    dti_session* s = nullptr;
    ASSERT_EQ(dti_session_open(path.c_str(), nullptr, &s), DTI_OK) << dti_last_error();
    dti_generation_config g = dti_generation_config_default();
    g.max_new_tokens = 16;
    g.ignore_eos = 1;
    dti_result* r = nullptr;
    ASSERT_EQ(dti_generate_tokens(s, prompt.data(), prompt.size(), &g, nullptr, nullptr, &r),
              DTI_OK)
        << dti_last_error();
    std::size_t n = 0;
    const std::int32_t* t = dti_result_tokens(r, 0, &n);
    out.emplace_back(t, t + n);
    dti_result_free(r);
    dti_session_close(s);
  }
  EXPECT_EQ(out[0].size(), 16u);
  EXPECT_EQ(out[0], out[1]);
  dti_session* bad = nullptr;
  EXPECT_EQ(dti_session_open((p.gguf + ".missing.gguf").c_str(), nullptr, &bad), DTI_NOT_FOUND);
}

}  // namespace
}  // namespace detinfer
