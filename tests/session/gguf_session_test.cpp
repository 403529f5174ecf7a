// A GGUF model through the session and the C API (docs/gguf.md): a .gguf path opens like a
// model folder (without a tokenizer: token-id prompts) and generates the same tokens, step
// digests and logprob bits as the same model's safetensors folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "detinfer/c_api.h"
#include "detinfer/error.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "tiny_session.h"

namespace detinfer {
namespace {

struct Pair {
  std::string hf;
  std::string gguf;
};

Pair tiny_pair(devtools::TinyArch arch, core::DType dtype, const std::string& name) {
  const std::string dir = testing::test_tmp_path("gguf-session-", name);
  std::filesystem::remove_all(dir);
  devtools::TinyModelOptions o;
  o.arch = arch;
  o.dtype = dtype;
  o.seed = 7;
  o.out_dir = dir + "/hf";
  devtools::make_tiny_model(o);
  std::filesystem::create_directories(dir + "/gguf");
  return {o.out_dir, devtools::write_gguf_model(o.out_dir, dir + "/gguf/tiny.gguf").front()};
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
       {devtools::TinyArch::kLlama, devtools::TinyArch::kQwen2, devtools::TinyArch::kQwen3}) {
    const Pair p = tiny_pair(arch, core::DType::kBF16, std::to_string(static_cast<int>(arch)));
    DeterministicSession hf = DeterministicSession::open(p.hf);
    DeterministicSession gg = DeterministicSession::open(p.gguf);
    EXPECT_EQ(gg.tokenizer(), nullptr);  // the GGUF tokenizer is not read yet
    const std::vector<std::int32_t> prompt = {5, 17, 300, 42, 9};
    for (const std::uint64_t seed : {1u, 2u}) {
      GenerationResult a = hf.generate(prompt, sampled(seed));
      const GenerationResult b = gg.generate(prompt, sampled(seed));
      ASSERT_EQ(a.sequences.size(), 2u);
      EXPECT_EQ(a.sequences[0].tokens.size(), 24u);
      // The text differs (no tokenizer); tokens, digests and logprob bits do not.
      for (auto& s : a.sequences) s.text.clear();
      testing::expect_identical(a, b, "arch " + std::to_string(static_cast<int>(arch)));
    }
    // A text prompt needs a tokenizer: a clear error, not a crash.
    EXPECT_THROW(gg.generate("hello"), Error);
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
