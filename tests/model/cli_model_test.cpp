// `detinfer make-tiny-model` and `detinfer logits` through the real program.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "devtools/model_tools.h"
#include "model/model_config.h"
#include "model/model_test_util.h"

namespace detinfer {
namespace {

// The end of `generate`'s summary line (stderr): the output digest and the mode.
std::string summary(const std::string& err) {
  const std::size_t at = err.find("digest=");
  return at == std::string::npos ? std::string("(no digest) " + err) : err.substr(at);
}

using testing::cli_path;
using testing::read_bytes;
using testing::run_shell;
using testing::scratch_dir;

const char* const kFiles[] = {"config.json", "generation_config.json", "model.safetensors",
                              "tokenizer.json", "tokenizer_config.json"};

TEST(CliModel, MakeTinyModelIsDeterministic) {
  const std::string a = scratch_dir("clia"), b = scratch_dir("clib"), c = scratch_dir("clic");
  for (const auto& [dir, seed] : {std::pair{a, 7}, std::pair{b, 7}, std::pair{c, 8}}) {
    const auto r = run_shell(cli_path() + " make-tiny-model --arch qwen3 --dtype bf16 --seed " +
                             std::to_string(seed) + " --out " + dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  for (const char* f : kFiles) {
    const std::string fa = read_bytes(a + "/" + f);
    EXPECT_FALSE(fa.empty()) << f;
    EXPECT_EQ(fa, read_bytes(b + "/" + f)) << f;
  }
  EXPECT_NE(read_bytes(a + "/model.safetensors"), read_bytes(c + "/model.safetensors"));
  EXPECT_EQ(read_bytes(a + "/config.json"), read_bytes(c + "/config.json"));
  const auto bad = run_shell(cli_path() + " make-tiny-model --arch gpt2 --out " + a);
  EXPECT_NE(bad.exit_code, 0);
  const auto bad_shape = run_shell(cli_path() + " make-tiny-model --heads 3 --out " + a);
  EXPECT_NE(bad_shape.exit_code, 0);
  EXPECT_NE(bad_shape.err.find("heads"), std::string::npos) << bad_shape.err;
}

// --arch olmo2 and --arch phi3 (with --partial-rotary-factor) write models that load as
// those architectures; a partial rotary factor is refused for the other architectures.
TEST(CliModel, MakeTinyModelWritesOlmo2AndPhi3) {
  const std::string olmo2 = scratch_dir("cli-olmo2"), phi3 = scratch_dir("cli-phi3");
  auto r = run_shell(cli_path() + " make-tiny-model --arch olmo2 --out " + olmo2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shell(cli_path() + " make-tiny-model --arch phi3 --partial-rotary-factor 0.5 --out " +
                phi3);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const model::ModelConfig o = model::load_model_config(olmo2);
  EXPECT_EQ(o.architecture, model::Architecture::kOlmo2);
  EXPECT_EQ(o.norm_placement, model::NormPlacement::kPost);
  const model::ModelConfig p = model::load_model_config(phi3);
  EXPECT_EQ(p.architecture, model::Architecture::kPhi3);
  EXPECT_EQ(p.partial_rotary_dim, 8);  // half of head_dim 16
  for (const std::string& dir : {olmo2, phi3}) {
    const auto gen =
        run_shell(cli_path() + " generate --model " + dir + " --prompt hello --max-new-tokens 4");
    EXPECT_EQ(gen.exit_code, 0) << dir << ": " << gen.err;
  }
  const auto bad = run_shell(cli_path() + " make-tiny-model --arch llama " +
                             "--partial-rotary-factor 0.5 --out " + scratch_dir("cli-bad"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("partial_rotary_factor"), std::string::npos) << bad.err;
}

TEST(CliModel, LogitsWritesRawFloatsAndSidecar) {
  const std::string dir = scratch_dir("clil");
  ASSERT_EQ(run_shell(cli_path() +
                      " make-tiny-model --arch llama --hidden 32 --heads 2 "
                      "--kv-heads 1 --intermediate 48 --vocab 300 --seed 3 --out " +
                      dir)
                .exit_code,
            0);
  for (const char* mode : {"canonical", "fast"}) {
    if (!DETINFER_TEST_WITH_TORCH && std::string(mode) == "fast") continue;  // no libtorch
    const std::string out = dir + "/logits-" + mode + ".bin";
    const auto r = run_shell(cli_path() + " logits --model " + dir + " --tokens 1,2,3,250 --mode " +
                             mode + " --threads 2 --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string bytes = read_bytes(out);
    ASSERT_EQ(bytes.size(), 4u * 300u * 4u);
    const auto side = nlohmann::json::parse(read_bytes(out + ".json"));
    EXPECT_EQ(side["shape"], nlohmann::json({4, 300}));
    EXPECT_EQ(side["mode"], mode);
    const devtools::LogitsResult lib = devtools::compute_logits(
        {dir,
         {1, 2, 3, 250},
         std::string(mode) == "fast" ? NumericsMode::kFast : NumericsMode::kCanonical,
         2});
    EXPECT_EQ(side["model_fingerprint"], lib.model_fingerprint);
    if (std::string(mode) == "canonical") {
      EXPECT_EQ(0, std::memcmp(bytes.data(), lib.logits.data(), bytes.size()));
    }
  }
  EXPECT_NE(
      run_shell(cli_path() + " logits --model " + dir + " --tokens 1,x --out /dev/null").exit_code,
      0);
  EXPECT_NE(
      run_shell(cli_path() + " logits --model " + dir + " --tokens 300 --out /dev/null").exit_code,
      0);
  const auto missing =
      run_shell(cli_path() + " logits --model /nonexistent --tokens 1 --out /dev/null");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("config.json"), std::string::npos) << missing.err;
}

// `make-tiny-model --fused-experts` stores the experts fused as transformers v5 does (after
// writing --gguf, whose converter reads the per-expert names): `logits` of the fused folder,
// the per-expert folder and the GGUF are the same bytes; a dense --arch is refused.
TEST(CliModel, MakeTinyModelFusesExperts) {
  const std::string dir = scratch_dir("cli-fused");
  const std::string make = cli_path() + " make-tiny-model --arch mixtral --seed 3 --out " + dir;
  auto r = run_shell(make + "/per");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shell(make + "/fused --fused-experts gate_up --gguf " + dir + "/tiny.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string fused = read_bytes(dir + "/fused/model.safetensors");
  EXPECT_NE(fused.find("model.layers.0.mlp.experts.gate_up_proj"), std::string::npos);
  EXPECT_EQ(fused.find("experts.0.w1"), std::string::npos);
  std::string bytes[3];
  const std::string models[3] = {dir + "/per", dir + "/fused", dir + "/tiny.gguf"};
  for (int i = 0; i < 3; ++i) {
    const std::string out = dir + "/logits-" + std::to_string(i) + ".bin";
    r = run_shell(cli_path() + " logits --tokens 1,2,3,250,7,9 --out " + out + " --model " +
                  models[i]);
    ASSERT_EQ(r.exit_code, 0) << models[i] << ": " << r.err;
    bytes[i] = read_bytes(out);
  }
  EXPECT_FALSE(bytes[0].empty());
  EXPECT_EQ(bytes[1], bytes[0]);
  EXPECT_EQ(bytes[2], bytes[0]);
  r = run_shell(cli_path() + " make-tiny-model --arch qwen3 --fused-experts gate_up --out " + dir +
                "/dense");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("mixture-of-experts"), std::string::npos) << r.err;
}

// `make-tiny-model --gguf` writes the model as GGUF too (and --gguf-splits a split set,
// --gguf-quantize q8_0 quantized weights); `generate --model x.gguf` (token ids and text)
// and `logits` (canonical and fast) give what the folder gives; the Q8_0 file what the
// folder gives with --weights q8_0; olmo2 and phi3 files too.
TEST(CliModel, GgufModelWorksWhereAFolderDoes) {
  const std::string dir = scratch_dir("cli-gguf");
  auto r = run_shell(cli_path() + " make-tiny-model --arch llama --dtype bf16 --seed 5 --out " +
                     dir + "/hf --gguf " + dir + "/tiny.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shell(cli_path() + " make-tiny-model --arch llama --dtype bf16 --seed 5 --out " + dir +
                "/hf2 --gguf " + dir + "/split/tiny.gguf --gguf-splits 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gen = " generate --prompt-ids 3,1,4,1,5 --max-new-tokens 12 --model ";
  const auto a = run_shell(cli_path() + gen + dir + "/hf");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string digest = summary(a.err);
  EXPECT_EQ(digest.rfind("digest=", 0), 0u) << a.err;
  for (const std::string& m :
       {dir + "/tiny.gguf", dir + "/split", dir + "/split/tiny-00002-of-00002.gguf"}) {
    const auto b = run_shell(cli_path() + gen + m);
    ASSERT_EQ(b.exit_code, 0) << m << ": " << b.err;
    EXPECT_EQ(summary(b.err), digest) << m;
  }
  for (const char* mode : {"canonical", "fast"}) {
    if (!DETINFER_TEST_WITH_TORCH && std::string(mode) == "fast") continue;  // no libtorch
    std::string bytes[2];
    for (int i = 0; i < 2; ++i) {
      const std::string out = dir + "/logits-" + std::to_string(i) + ".bin";
      r = run_shell(cli_path() + " logits --tokens 1,2,3,250 --mode " + mode + " --out " + out +
                    " --model " + (i == 0 ? dir + "/hf" : dir + "/tiny.gguf"));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      bytes[i] = read_bytes(out);
    }
    EXPECT_FALSE(bytes[0].empty());
    EXPECT_EQ(bytes[0], bytes[1]) << mode;
  }
  // A text prompt through the GGUF tokenizer, and a Q8_0 file against --weights q8_0.
  const std::string text = " generate --prompt 'Hello there' --max-new-tokens 8 --model ";
  const auto th = run_shell(cli_path() + text + dir + "/hf");
  const auto tg = run_shell(cli_path() + text + dir + "/tiny.gguf");
  ASSERT_EQ(tg.exit_code, 0) << tg.err;
  EXPECT_EQ(tg.out, th.out);
  EXPECT_EQ(summary(tg.err), summary(th.err));
  // Tied embeddings: the quantized token_embd is the lm_head, as --weights makes it (an
  // untied one is quantized in the file but kept as stored by --weights).
  r = run_shell(cli_path() + " make-tiny-model --arch llama --dtype bf16 --seed 5 --out " + dir +
                "/hf3 --tie-word-embeddings --gguf " + dir + "/q8/tiny.gguf --gguf-quantize q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto q8 = run_shell(cli_path() + gen + dir + "/q8/tiny.gguf");
  const auto q8_folder = run_shell(cli_path() + gen + dir + "/hf3 --weights q8_0");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  EXPECT_EQ(summary(q8.err), summary(q8_folder.err));
  EXPECT_NE(summary(q8.err), digest);
  // olmo2 and phi3 (partial rotary) files generate what their folders generate.
  for (const std::string arch : {"olmo2", "phi3 --partial-rotary-factor 0.5"}) {
    const std::string at = dir + "/" + arch.substr(0, arch.find(' '));
    r = run_shell(cli_path() + " make-tiny-model --dtype bf16 --seed 6 --arch " + arch + " --out " +
                  at + "/hf --gguf " + at + "/m.gguf");
    ASSERT_EQ(r.exit_code, 0) << arch << ": " << r.err;
    const auto folder = run_shell(cli_path() + gen + at + "/hf");
    const auto file = run_shell(cli_path() + gen + at + "/m.gguf");
    ASSERT_EQ(file.exit_code, 0) << arch << ": " << file.err;
    EXPECT_EQ(summary(file.err), summary(folder.err)) << arch;
  }
  // llama3 rope scaling (rope_freqs in llama.cpp's files) is not written.
  const auto bad = run_shell(cli_path() + " make-tiny-model --arch llama --llama3-rope-scaling " +
                             "--out " + dir + "/l3 --gguf " + dir + "/l3.gguf");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("llama3"), std::string::npos) << bad.err;
}

// `detinfer quantize` writes a folder as a quantized GGUF file that computes what the folder
// computes with --weights of that type (untied embedding kept as stored with
// --keep-embedding; quantized like llama.cpp does without it); bad input fails clearly.
TEST(CliModel, QuantizeWritesAGgufThatComputesLikeWeightsOnLoad) {
  const std::string dir = scratch_dir("cli-quantize");
  auto r = run_shell(cli_path() + " make-tiny-model --arch qwen2 --dtype bf16 --seed 8 --out " +
                     dir + "/hf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gen = " generate --prompt 'Quantized, deterministic.' --max-new-tokens 10 ";
  for (const char* type : {"q8_0", "q4_0", "q5_0"}) {
    const std::string file = dir + "/" + type + "/model.gguf";
    r = run_shell(cli_path() + " quantize --model " + dir + "/hf --type " + type +
                  " --keep-embedding --out " + file);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto on_load = run_shell(cli_path() + gen + "--model " + dir + "/hf --weights " + type);
    const auto from_file = run_shell(cli_path() + gen + "--model " + file);
    ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
    EXPECT_EQ(from_file.out, on_load.out) << type;
    EXPECT_EQ(summary(from_file.err), summary(on_load.err)) << type;
  }
  // Without --keep-embedding the untied embedding is quantized too: it loads and runs.
  r = run_shell(cli_path() + " quantize --model " + dir + "/hf --type q8_0 --out " + dir +
                "/all/model.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto all = run_shell(cli_path() + gen + "--model " + dir + "/all/model.gguf");
  EXPECT_EQ(all.exit_code, 0) << all.err;
  const auto bad_type = run_shell(cli_path() + " quantize --model " + dir +
                                  "/hf --type q3_x --out " + dir + "/bad.gguf");
  EXPECT_NE(bad_type.exit_code, 0);
  EXPECT_NE(bad_type.err.find("--type"), std::string::npos) << bad_type.err;
  const auto no_model = run_shell(cli_path() + " quantize --model " + dir +
                                  "/missing --type q8_0 --out " + dir + "/bad.gguf");
  EXPECT_NE(no_model.exit_code, 0);
  EXPECT_NE(no_model.err.find("config.json"), std::string::npos) << no_model.err;
}

}  // namespace
}  // namespace detinfer
