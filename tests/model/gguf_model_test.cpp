// GGUF models (model/gguf_model.h, docs/gguf.md): the config read from the metadata equals
// the one config.json gives, and a tiny model loaded from its GGUF computes logits bitwise
// equal to the same model loaded from safetensors, for each architecture and dtype, from
// one file, a folder and a split set. The llama Q/K rows really are permuted in the file.
#include "model/gguf_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "gguf_model_util.h"
#include "model/model.h"
#include "model/tensor_store.h"

namespace detinfer::model {
namespace {

using devtools::TinyArch;
using testing::tiny_gguf;

struct ArchCase {
  TinyArch arch;
  core::DType dtype;
};

class GgufModelArch : public ::testing::TestWithParam<ArchCase> {};

ModelConfig config_of_gguf(const std::string& path) {
  const auto m = GgufModel::open(path);
  return gguf_model_config(*m);
}

TEST_P(GgufModelArch, ConfigEqualsConfigJson) {
  const auto t = tiny_gguf(GetParam().arch, GetParam().dtype, "cfg");
  const ModelConfig hf = load_model_config(t.hf_dir);
  const ModelConfig g = config_of_gguf(t.gguf);
  // Every field that affects computation, and bos/eos, in one text (the fingerprint's).
  EXPECT_EQ(canonical_config_text(g), canonical_config_text(hf));
  EXPECT_EQ(g.head_dim, GetParam().arch == TinyArch::kQwen3 ? 32 : 16);
  EXPECT_EQ(g.partial_rotary_dim, GetParam().arch == TinyArch::kPhi3 ? 12 : 0);
  EXPECT_EQ(g.tie_word_embeddings, GetParam().arch == TinyArch::kQwen2);
}

TEST_P(GgufModelArch, LogitsBitwiseEqualToSafetensors) {
  const auto t = tiny_gguf(GetParam().arch, GetParam().dtype, "logits");
  const std::vector<float> hf = testing::logits_of(t.hf_dir);
  const std::vector<float> g = testing::logits_of(t.gguf);
  ASSERT_EQ(hf.size(), g.size());
  EXPECT_EQ(std::memcmp(hf.data(), g.data(), hf.size() * 4), 0);
  // A folder holding only the GGUF file loads the same model.
  const std::string folder = t.gguf.substr(0, t.gguf.rfind('/'));
  EXPECT_EQ(testing::logits_of(folder), g);
}

std::string arch_case_name(const ::testing::TestParamInfo<ArchCase>& info) {
  static const char* const kNames[] = {"llama", "mistral", "qwen2", "qwen3", "olmo2", "phi3"};
  return std::string(kNames[static_cast<int>(info.param.arch)]) + "_" +
         core::to_string(info.param.dtype);
}

INSTANTIATE_TEST_SUITE_P(Archs, GgufModelArch,
                         ::testing::Values(ArchCase{TinyArch::kLlama, core::DType::kF32},
                                           ArchCase{TinyArch::kLlama, core::DType::kBF16},
                                           ArchCase{TinyArch::kQwen2, core::DType::kF32},
                                           ArchCase{TinyArch::kQwen2, core::DType::kBF16},
                                           ArchCase{TinyArch::kQwen3, core::DType::kF32},
                                           ArchCase{TinyArch::kQwen3, core::DType::kBF16},
                                           ArchCase{TinyArch::kOlmo2, core::DType::kF32},
                                           ArchCase{TinyArch::kOlmo2, core::DType::kBF16},
                                           ArchCase{TinyArch::kPhi3, core::DType::kF32},
                                           ArchCase{TinyArch::kPhi3, core::DType::kBF16}),
                         arch_case_name);

TEST(GgufModel, MistralAndF16LoadAsLlama) {
  const auto t = tiny_gguf(TinyArch::kMistral, core::DType::kF16, "mistral");
  EXPECT_EQ(config_of_gguf(t.gguf).architecture, Architecture::kLlama);
  EXPECT_EQ(testing::logits_of(t.hf_dir), testing::logits_of(t.gguf));
}

TEST(GgufModel, LlamaRowOrderInvertsTheConverterPermutation) {
  // One head of 4 rows: HF rows [a0 a1 | b0 b1] are stored as [a0 b0 a1 b1].
  EXPECT_EQ(llama_qk_row_order(1, 4), (std::vector<std::int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(llama_qk_row_order(2, 4), (std::vector<std::int64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
}

// The file's Q/K rows differ from the safetensors ones (so the bitwise-equal logits above
// depend on the un-permutation), and a llama file whose Q/K rows are left in Hugging Face
// order — what a loader that skipped the un-permutation would compute with — gives other
// logits.
TEST(GgufModel, LlamaQkUnpermutationMatters) {
  const auto t = tiny_gguf(TinyArch::kLlama, core::DType::kF32, "perm");
  const TensorStore store = TensorStore::open(t.hf_dir);
  const TensorRef& hf_q = store.get("model.layers.0.self_attn.q_proj.weight");
  const auto gm = GgufModel::open(t.gguf);
  const auto [gq, gfile] = gm->find("blk.0.attn_q.weight");
  ASSERT_NE(gq, nullptr);
  ASSERT_EQ(gq->bytes, hf_q.info->size());
  const std::uint8_t* stored = gfile->data() + gm->metadata().data_offset + gq->offset;
  EXPECT_NE(std::memcmp(stored, hf_q.data(), gq->bytes), 0);

  testing::GgufEdits e;
  e.tensors = [&](std::vector<testing::GgufTensorCopy>& ts) {
    for (const char* name : {"q_proj", "k_proj"}) {
      for (int l = 0; l < 2; ++l) {
        const std::string hf =
            "model.layers." + std::to_string(l) + ".self_attn." + name + ".weight";
        const TensorRef& r = store.get(hf);
        testing::tensor_named(ts, gguf_tensor_name(hf, Architecture::kLlama))
            ->data.assign(r.data(), r.data() + r.info->size());
      }
    }
  };
  const std::string unpermuted = testing::scratch_dir("unperm") + "/m.gguf";
  testing::copy_gguf(t.gguf, unpermuted, e);
  EXPECT_NE(testing::logits_of(unpermuted), testing::logits_of(t.hf_dir));
}

TEST(GgufModel, LinearRopeScalingMapsAndMatches) {
  const std::string dir = testing::scratch_dir("linear");
  devtools::TinyModelOptions o =
      testing::tiny_options(TinyArch::kLlama, core::DType::kF32, dir + "/hf");
  o.llama3_rope_scaling = false;
  devtools::make_tiny_model(o);
  nlohmann::json c = nlohmann::json::parse(testing::read_bytes(o.out_dir + "/config.json"));
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  testing::write_bytes(o.out_dir + "/config.json", c.dump());
  const std::string gguf = devtools::write_gguf_model(o.out_dir, dir + "/m.gguf").front();
  const ModelConfig g = config_of_gguf(gguf);
  EXPECT_EQ(g.rope_scaling.type, "linear");
  EXPECT_EQ(g.rope_scaling.factor, 4.0);
  EXPECT_EQ(testing::logits_of(o.out_dir, 40), testing::logits_of(gguf, 40));
}

TEST(GgufModel, SplitSetLoadsFromAnyShardOrTheFolder) {
  const auto t = tiny_gguf(TinyArch::kQwen3, core::DType::kBF16, "split", 3);
  ASSERT_EQ(t.files.size(), 3u);
  EXPECT_NE(t.files[0].find("model-00001-of-00003.gguf"), std::string::npos);
  const std::vector<float> hf = testing::logits_of(t.hf_dir);
  EXPECT_EQ(testing::logits_of(t.files[0]), hf);
  EXPECT_EQ(testing::logits_of(t.files[2]), hf);
  EXPECT_EQ(testing::logits_of(t.files[0].substr(0, t.files[0].rfind('/'))), hf);
}

TEST(GgufModel, FingerprintCommitsToTheWeightsAndMetadata) {
  const auto a = tiny_gguf(TinyArch::kLlama, core::DType::kF32, "fpa", 1, 1);
  const auto b = tiny_gguf(TinyArch::kLlama, core::DType::kF32, "fpb", 1, 2);
  ModelOptions mo;
  const auto fa = Model::load(a.gguf, mo)->fingerprint();
  EXPECT_NE(fa, Model::load(b.gguf, mo)->fingerprint());
  EXPECT_EQ(fa, Model::load(a.gguf, mo)->fingerprint());
  // A metadata value the config does not keep (context length is kept; a key of the
  // architecture that detinfer ignores is not) still changes it.
  testing::GgufEdits e;
  e.metadata["llama.expert_count"] = testing::set_u32(0);
  const std::string edited = testing::scratch_dir("fpc") + "/m.gguf";
  testing::copy_gguf(a.gguf, edited, e);
  EXPECT_NE(fa, Model::load(edited, mo)->fingerprint());
}

TEST(GgufModel, FolderRules) {
  const auto t = tiny_gguf(TinyArch::kQwen2, core::DType::kF32, "folder");
  // A Hugging Face folder that also holds a .gguf is read as the Hugging Face folder.
  testing::write_bytes(t.hf_dir + "/model.gguf", testing::read_bytes(t.gguf));
  EXPECT_FALSE(is_gguf_model(t.hf_dir));
  // Two unrelated .gguf files: refused, naming both.
  const std::string two = testing::scratch_dir("two");
  testing::write_bytes(two + "/a.gguf", testing::read_bytes(t.gguf));
  testing::write_bytes(two + "/b.gguf", testing::read_bytes(t.gguf));
  try {
    Model::load(two, {});
    FAIL() << "loaded a folder with two models";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("a.gguf"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace detinfer::model
