// Hostile GGUF models (docs/gguf.md, "What is refused"): each edit of a good tiny model's
// file is a clear detinfer::Error with the expected code, naming the key or tensor.
#include <gtest/gtest.h>

#include <cstdio>

#include "detinfer/error.h"
#include "gguf_model_util.h"
#include "model/model.h"

namespace detinfer::model {
namespace {

using devtools::TinyArch;
using testing::GgufEdits;
using testing::GgufTensorCopy;

struct Expected {
  ErrorCode code;
  std::string field;    // "" = not checked
  std::string message;  // a substring of the message
};

void expect_refused(const std::string& path, const Expected& want) {
  try {
    Model::load(path, {});
    FAIL() << "loaded " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want.code) << e.what();
    if (!want.field.empty()) {
      EXPECT_EQ(e.field(), want.field) << e.what();
    }
    EXPECT_NE(e.message().find(want.message), std::string::npos) << e.what();
  }
}

class GgufHostileModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llama_ = new testing::TinyGguf(
        testing::tiny_gguf(TinyArch::kLlama, core::DType::kF32, "hostile-llama"));
  }
  static void TearDownTestSuite() { delete llama_; }
  // The llama file with `e` applied.
  static std::string edited(const GgufEdits& e) {
    const std::string out = testing::scratch_dir("hostile") + "/m.gguf";
    testing::copy_gguf(llama_->gguf, out, e);
    return out;
  }
  static testing::TinyGguf* llama_;
};
testing::TinyGguf* GgufHostileModel::llama_ = nullptr;

GgufEdits meta(const std::string& key, testing::MetaWriter w) {
  GgufEdits e;
  e.metadata[key] = std::move(w);
  return e;
}

TEST_F(GgufHostileModel, TheUneditedCopyLoads) {
  EXPECT_EQ(testing::logits_of(edited({})), testing::logits_of(llama_->hf_dir));
}

TEST_F(GgufHostileModel, MissingKey) {
  expect_refused(edited(meta("llama.block_count", nullptr)),
                 {ErrorCode::kNotFound, "llama.block_count", "llama.block_count"});
  expect_refused(edited(meta("general.architecture", nullptr)),
                 {ErrorCode::kNotFound, "general.architecture", "general.architecture"});
  expect_refused(edited(meta("llama.attention.layer_norm_rms_epsilon", nullptr)),
                 {ErrorCode::kNotFound, "llama.attention.layer_norm_rms_epsilon", ""});
}

TEST_F(GgufHostileModel, WrongTypeOrRange) {
  expect_refused(edited(meta("llama.block_count", testing::set_string("two"))),
                 {ErrorCode::kCorrupt, "llama.block_count", "llama.block_count"});
  expect_refused(edited(meta("llama.embedding_length", testing::set_u32(0))),
                 {ErrorCode::kCorrupt, "llama.embedding_length", "outside"});
}

TEST_F(GgufHostileModel, WrongHeadCounts) {
  // 3 does not divide 4 heads.
  expect_refused(edited(meta("llama.attention.head_count_kv", testing::set_u32(3))),
                 {ErrorCode::kCorrupt, "llama.attention.head_count_kv", "does not divide"});
  // 8 heads of 8 dims: attn_q's shape no longer matches.
  expect_refused(edited(meta("llama.attention.head_count", testing::set_u32(8))),
                 {ErrorCode::kUnsupported, "llama.rope.dimension_count", "head_dim"});
  GgufEdits e = meta("llama.attention.head_count", testing::set_u32(8));
  e.metadata["llama.rope.dimension_count"] = testing::set_u32(8);
  expect_refused(edited(e), {ErrorCode::kCorrupt, "", "blk.0.attn_k.weight"});
  expect_refused(edited(meta("llama.attention.value_length", testing::set_u32(8))),
                 {ErrorCode::kUnsupported, "llama.attention.value_length", "key_length"});
}

TEST_F(GgufHostileModel, TensorShapeMismatch) {
  GgufEdits e;
  e.tensors = [](std::vector<GgufTensorCopy>& ts) {
    GgufTensorCopy* t = testing::tensor_named(ts, "blk.1.ffn_down.weight");
    std::swap(t->dims[0], t->dims[1]);  // [hidden][inter] stored as [inter][hidden]
  };
  expect_refused(edited(e), {ErrorCode::kCorrupt, "", "blk.1.ffn_down.weight"});
}

TEST_F(GgufHostileModel, MissingTensor) {
  GgufEdits e;
  e.tensors = [](std::vector<GgufTensorCopy>& ts) {
    ts.erase(ts.begin() + (testing::tensor_named(ts, "blk.1.ffn_up.weight") - ts.data()));
  };
  expect_refused(edited(e), {ErrorCode::kNotFound, "", "blk.1.ffn_up.weight"});
  GgufEdits no_embd;
  no_embd.tensors = [](std::vector<GgufTensorCopy>& ts) {
    ts.erase(ts.begin() + (testing::tensor_named(ts, "token_embd.weight") - ts.data()));
  };
  expect_refused(edited(no_embd), {ErrorCode::kNotFound, "token_embd.weight", ""});
}

TEST_F(GgufHostileModel, UnsupportedArchitecture) {
  expect_refused(edited(meta("general.architecture", testing::set_string("gemma"))),
                 {ErrorCode::kUnsupported, "general.architecture", "gemma"});
}

// llama files with llama.expert_count > 0 are Mixtral's (gguf_family_hostile_test.cpp): a
// dense file given experts is a clear error before any tensor is read.
TEST_F(GgufHostileModel, ExpertCountInADenseFile) {
  expect_refused(edited(meta("llama.expert_count", testing::set_u32(8))),
                 {ErrorCode::kNotFound, "llama.expert_used_count", "expert_used_count"});
  GgufEdits e = meta("llama.expert_count", testing::set_u32(8));
  e.metadata["llama.expert_used_count"] = testing::set_u32(2);
  expect_refused(edited(e), {ErrorCode::kCorrupt, "llama.expert_count", "router"});
}

// A quantized type without kernels (Q8_1 here; Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and Q2_K..Q6_K
// load: session_gguf_tests, session_gguf_kquant_tests).
TEST_F(GgufHostileModel, UnsupportedQuantizedTensorNamesTensorAndType) {
  GgufEdits e;
  e.tensors = [](std::vector<GgufTensorCopy>& ts) {
    GgufTensorCopy* t = testing::tensor_named(ts, "blk.0.ffn_gate.weight");
    const std::uint64_t rows = t->dims[1], blocks = t->dims[0] / 32;
    t->type = static_cast<std::uint32_t>(GgmlType::kQ8_1);
    t->data.assign(rows * blocks * 36, 0);
  };
  expect_refused(edited(e), {ErrorCode::kUnsupported, "blk.0.ffn_gate.weight", "Q8_1"});
}

// A K-quant tensor whose rows (64 weights) are not whole super-blocks of 256.
TEST_F(GgufHostileModel, KQuantRowsNotWholeSuperBlocksAreCorrupt) {
  GgufEdits e;
  e.tensors = [](std::vector<GgufTensorCopy>& ts) {
    GgufTensorCopy* t = testing::tensor_named(ts, "blk.0.ffn_gate.weight");
    t->type = static_cast<std::uint32_t>(GgmlType::kQ4_K);
    t->data.assign(t->dims[1] * 144, 0);  // one super-block per row: 256 weights, not 64
  };
  expect_refused(edited(e), {ErrorCode::kCorrupt, "", "'blk.0.ffn_gate.weight' of type Q4_K"});
}

TEST_F(GgufHostileModel, ContradictingVocab) {
  expect_refused(edited(meta("llama.vocab_size", testing::set_u32(600))),
                 {ErrorCode::kCorrupt, "llama.vocab_size", "token_embd.weight"});
  expect_refused(edited(meta("tokenizer.ggml.eos_token_id", testing::set_u32(512))),
                 {ErrorCode::kCorrupt, "tokenizer.ggml.eos_token_id", ">= vocab size"});
}

TEST_F(GgufHostileModel, UnsupportedRope) {
  expect_refused(edited(meta("llama.rope.scaling.type", testing::set_string("yarn"))),
                 {ErrorCode::kUnsupported, "llama.rope.scaling.type", "yarn"});
  GgufEdits freqs;
  freqs.tensors = [](std::vector<GgufTensorCopy>& ts) {
    ts.push_back({"rope_freqs.weight", {8}, 0, std::vector<std::uint8_t>(32, 0)});
  };
  expect_refused(edited(freqs), {ErrorCode::kUnsupported, "rope_freqs.weight", "llama3"});
}

TEST_F(GgufHostileModel, TensorTheModelDoesNotUse) {
  GgufEdits e;  // a q bias in a llama file would be silently ignored: refused
  e.tensors = [](std::vector<GgufTensorCopy>& ts) {
    ts.push_back({"blk.0.attn_q.bias", {64}, 0, std::vector<std::uint8_t>(256, 0)});
  };
  expect_refused(edited(e), {ErrorCode::kUnsupported, "blk.0.attn_q.bias", "not used"});
}

TEST(GgufHostileSplit, BadSplitKeysAndMissingShards) {
  const auto t = testing::tiny_gguf(TinyArch::kQwen2, core::DType::kF32, "hostile-split", 2);
  const std::string second = t.files[1];
  // split.no of the second shard says 0.
  testing::copy_gguf(second, second, meta("split.no", testing::set_u32(0)));
  expect_refused(t.files[0], {ErrorCode::kCorrupt, "split.no", "shard 1"});
  testing::copy_gguf(second, second, meta("split.no", testing::set_u32(1)));
  EXPECT_EQ(testing::logits_of(t.files[0]), testing::logits_of(t.hf_dir));
  testing::copy_gguf(second, second, meta("split.count", testing::set_u32(3)));
  expect_refused(t.files[0], {ErrorCode::kCorrupt, "split.count", "2 files"});
  testing::copy_gguf(second, second, meta("split.count", nullptr));
  expect_refused(t.files[0], {ErrorCode::kNotFound, "split.count", ""});
  testing::copy_gguf(second, second, meta("split.count", testing::set_u32(2)));
  testing::copy_gguf(t.files[0], t.files[0], meta("split.tensors.count", testing::set_u32(5)));
  expect_refused(t.files[0], {ErrorCode::kCorrupt, "split.tensors.count", ""});
  std::remove(second.c_str());
  expect_refused(t.files[0], {ErrorCode::kNotFound, "", "00002-of-00002"});
}

}  // namespace
}  // namespace detinfer::model
