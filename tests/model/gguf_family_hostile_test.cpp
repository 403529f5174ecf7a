// Hostile Gemma and mixture-of-experts GGUF files (docs/gguf.md, "What is refused"): each
// edit of a good tiny file is a clear detinfer::Error with the expected code, naming the key
// or tensor, never a crash.
#include <gtest/gtest.h>

#include <map>

#include "gguf_model_util.h"

namespace detinfer::model {
namespace {

using devtools::TinyArch;
using testing::expect_refused;
using testing::GgufEdits;
using testing::GgufTensorCopy;

GgufEdits meta(const std::string& key, testing::MetaWriter w) {
  GgufEdits e;
  e.metadata[key] = std::move(w);
  return e;
}

std::string edited(const testing::TinyGguf& t, const GgufEdits& e) {
  return testing::edited(t.gguf, e, "gf-hostile");
}

// Replaces the tensor `name` of a copy by `dims` of its type and the bytes they take.
GgufEdits reshaped(const std::string& name, std::vector<std::uint64_t> dims) {
  return testing::tensor_edit([name, dims](std::vector<GgufTensorCopy>& ts) {
    GgufTensorCopy* t = testing::tensor_named(ts, name);
    std::uint64_t n = 1;
    for (const std::uint64_t d : dims) n *= d;
    t->data.resize(n * sizeof(float));  // the fixtures are f32
    t->dims = dims;
  });
}

GgufEdits dropped(const std::string& prefix, const std::string& suffix) {
  return testing::tensor_edit([prefix, suffix](std::vector<GgufTensorCopy>& ts) {
    std::vector<GgufTensorCopy> keep;
    for (auto& t : ts) {
      const bool match = t.name.compare(0, prefix.size(), prefix) == 0 &&
                         t.name.size() >= suffix.size() &&
                         t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (!match) keep.push_back(std::move(t));
    }
    ts = std::move(keep);
  });
}

class GgufFamilyHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const TinyArch a : {TinyArch::kQwen3Moe, TinyArch::kQwen2Moe, TinyArch::kMixtral,
                             TinyArch::kGemma2, TinyArch::kGemma3}) {
      files_[static_cast<int>(a)] = testing::tiny_gguf(
          a, core::DType::kF32, std::string("gf-hostile-") + devtools::tiny_arch_name(a));
    }
  }
  static const testing::TinyGguf& of(TinyArch a) { return files_[static_cast<int>(a)]; }
  static std::map<int, testing::TinyGguf> files_;
};
std::map<int, testing::TinyGguf> GgufFamilyHostile::files_;

TEST_F(GgufFamilyHostile, TheUneditedCopiesLoad) {
  for (const TinyArch a : {TinyArch::kQwen3Moe, TinyArch::kGemma3}) {
    EXPECT_EQ(testing::logits_of(edited(of(a), {})), testing::logits_of(of(a).hf_dir));
  }
}

TEST_F(GgufFamilyHostile, ExpertCounts) {
  const auto& q = of(TinyArch::kQwen3Moe);
  expect_refused(edited(q, meta("qwen3moe.expert_used_count", testing::set_u32(9))),
                 ErrorCode::kCorrupt, "qwen3moe.expert_used_count", "exceeds expert_count 8");
  expect_refused(edited(q, meta("qwen3moe.expert_used_count", testing::set_u32(0))),
                 ErrorCode::kCorrupt, "qwen3moe.expert_used_count", "outside");
  expect_refused(edited(q, meta("qwen3moe.expert_count", testing::set_u32(0))), ErrorCode::kCorrupt,
                 "qwen3moe.expert_count", "outside");
  expect_refused(edited(q, meta("qwen3moe.expert_count", nullptr)), ErrorCode::kNotFound,
                 "qwen3moe.expert_count", "");
  expect_refused(edited(q, meta("qwen3moe.expert_used_count", nullptr)), ErrorCode::kNotFound,
                 "qwen3moe.expert_used_count", "");
  // Without the expert width, llama.cpp's feed_forward_length / expert_used_count (64) is
  // not the stacked tensors' 32.
  expect_refused(edited(q, meta("qwen3moe.expert_feed_forward_length", nullptr)),
                 ErrorCode::kCorrupt, "blk.0.ffn_down_exps.weight", "[64, 64, 8]");
  expect_refused(edited(q, meta("qwen3moe.expert_weights_scale", testing::set_f32(2.5f))),
                 ErrorCode::kUnsupported, "qwen3moe.expert_weights_scale", "2.5");
  // Fewer experts than the stacked tensors hold: their dims no longer match.
  expect_refused(edited(q, meta("qwen3moe.expert_count", testing::set_u32(4))), ErrorCode::kCorrupt,
                 "blk.0.ffn_down_exps.weight", "[columns, rows, expert_count]");
  expect_refused(edited(q, meta("qwen3moe.expert_shared_feed_forward_length", testing::set_u32(8))),
                 ErrorCode::kUnsupported, "qwen3moe.expert_shared_feed_forward_length", "shared");
  // Without the shared width, llama.cpp's feed_forward_length (128) is not the tensors' 48.
  expect_refused(
      edited(of(TinyArch::kQwen2Moe), meta("qwen2moe.expert_shared_feed_forward_length", nullptr)),
      ErrorCode::kCorrupt, "", "blk.0.ffn_down_shexp.weight");
  expect_refused(
      edited(of(TinyArch::kMixtral),
             meta("llama.expert_weights_norm", [](auto& w, auto& k) { w.add_bool(k, false); })),
      ErrorCode::kUnsupported, "llama.expert_weights_norm", "renormalizes");
}

TEST_F(GgufFamilyHostile, StackedTensorsOfTheWrongShape) {
  const auto& q = of(TinyArch::kQwen3Moe);
  const std::string up = "blk.0.ffn_up_exps.weight";
  expect_refused(edited(q, reshaped(up, {64, 32, 4})), ErrorCode::kCorrupt, up,
                 "has dims [64, 32, 4] but the metadata implies [64, 32, 8]");
  expect_refused(edited(q, reshaped(up, {64, 256})), ErrorCode::kCorrupt, up, "[64, 256]");
  expect_refused(edited(q, reshaped(up, {32, 64, 8})), ErrorCode::kCorrupt, up, "[32, 64, 8]");
  expect_refused(edited(q, reshaped(up, {64, 32, 8, 1})), ErrorCode::kCorrupt, up,
                 "[64, 32, 8, 1]");
  // No stacked and no per-expert tensor: named missing.
  expect_refused(edited(q, dropped("blk.0.ffn_up_exps", "")), ErrorCode::kNotFound, "",
                 "blk.0.ffn_up_exps.weight");
  // No routers at all: not a mixture of experts.
  expect_refused(edited(q, dropped("blk.", ".ffn_gate_inp.weight")), ErrorCode::kCorrupt,
                 "qwen3moe.expert_count", "router");
  // The shared expert's gate of another width.
  expect_refused(edited(of(TinyArch::kQwen2Moe), reshaped("blk.1.ffn_gate_inp_shexp.weight", {32})),
                 ErrorCode::kCorrupt, "", "blk.1.ffn_gate_inp_shexp.weight");
}

TEST_F(GgufFamilyHostile, GemmaKeys) {
  const auto& g2 = of(TinyArch::kGemma2);
  for (const char* k : {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping"}) {
    expect_refused(edited(g2, meta(k, nullptr)), ErrorCode::kNotFound, k, k);
    expect_refused(edited(g2, meta(k, testing::set_f32(0.0f))), ErrorCode::kCorrupt, k, "outside");
  }
  expect_refused(edited(g2, meta("gemma2.expert_count", testing::set_u32(8))),
                 ErrorCode::kUnsupported, "gemma2.expert_count", "experts");
  const auto& g3 = of(TinyArch::kGemma3);
  const std::string pattern = "gemma3.attention.sliding_window_pattern";
  expect_refused(edited(g3, meta(pattern, testing::set_u32(0))), ErrorCode::kCorrupt, pattern,
                 "outside");
  expect_refused(edited(g3, meta(pattern,
                                 [](auto& w, auto& k) {
                                   w.add_bool_array(k, {true, false, true});
                                 })),
                 ErrorCode::kCorrupt, pattern, "expected 2 bools");
  expect_refused(edited(g3, meta("gemma3.rope.freq_base_swa", testing::set_f32(0.0f))),
                 ErrorCode::kCorrupt, "gemma3.rope.freq_base_swa", "outside");
  // A per-layer pattern array loads (layer 0 windowed, layer 1 global: the period-2 model).
  EXPECT_EQ(testing::logits_of(edited(g3, meta(pattern,
                                               [](auto& w, auto& k) {
                                                 w.add_bool_array(k, {true, false});
                                               }))),
            testing::logits_of(g3.hf_dir));
  // A norm the converter writes, missing; a Gemma file without its post norms.
  expect_refused(edited(g3, dropped("blk.1.post_ffw_norm", "")), ErrorCode::kNotFound, "",
                 "blk.1.post_ffw_norm.weight");
}

}  // namespace
}  // namespace detinfer::model
