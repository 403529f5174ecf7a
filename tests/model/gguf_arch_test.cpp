// GGUF files of the olmo2 and phi3 architectures (docs/gguf.md), as llama.cpp's converter
// writes them: OLMo 2's post norms (post_attention_norm, post_ffw_norm), Phi-3's fused
// attn_qkv and ffn_up (gate | up), partial rotary from rope.dimension_count, longrope
// factors as the tensors rope_factors_long/short.weight with rope.scaling.attn_factor and
// rope.scaling.original_context_length, and the sliding window. The config read from the
// file equals config.json's and the logits are bitwise equal to the folder's; hostile
// edits are clear errors naming the key or tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "gguf_model_util.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "model/tensor_store.h"

namespace detinfer::model {
namespace {

using devtools::TinyArch;
using json = nlohmann::json;

using testing::config_of;

// A tiny phi3 folder (partial rotary 0.75: 12 of 16 dims, 6 factor pairs) with `edit`
// applied to its config.json, and its GGUF.
testing::TinyGguf phi3_gguf(const std::string& name, const std::function<void(json&)>& edit) {
  const std::string dir = testing::scratch_dir(name);
  devtools::TinyModelOptions o =
      testing::tiny_options(TinyArch::kPhi3, core::DType::kF32, dir + "/hf", 7);
  devtools::make_tiny_model(o);
  json c = json::parse(testing::read_bytes(o.out_dir + "/config.json"));
  edit(c);
  testing::write_bytes(o.out_dir + "/config.json", c.dump());
  testing::TinyGguf t;
  t.hf_dir = o.out_dir;
  t.files = devtools::write_gguf_model(t.hf_dir, dir + "/m.gguf");
  t.gguf = t.files.front();
  return t;
}

// longrope as Phi-3.5 / Phi-4-mini write it, with factors that are f32 values (GGUF stores
// them as F32), original length 512 of 2048 positions (factor 4: attention factor > 1).
void longrope(json& c) {
  std::vector<double> s, l;
  for (int i = 0; i < 6; ++i) {
    s.push_back(1.0 + 0.75 * i);
    l.push_back(20.0 + 0.5 * i);
  }
  c["rope_scaling"] = {{"type", "longrope"}, {"short_factor", s}, {"long_factor", l}};
  c["original_max_position_embeddings"] = 512;
}

using testing::expect_same_model;

TEST(GgufArch, Phi3LongropeAndPartialRotaryMatchTheFolder) {
  const auto t = phi3_gguf("g-phi3-longrope", longrope);
  const ModelConfig g = config_of(t.gguf);
  EXPECT_EQ(g.rope_scaling.type, "longrope");
  EXPECT_EQ(g.partial_rotary_dim, 12);
  EXPECT_EQ(g.rope_scaling.short_factor.size(), 6u);
  EXPECT_EQ(g.rope_scaling.factor, 4.0);
  EXPECT_EQ(g.rope_scaling.attention_factor, 0.0);  // the file's equals the derived one
  EXPECT_EQ(g.max_position_embeddings, 512);        // canonical longrope: original length
  expect_same_model(t);
  // What the converter wrote: the factors as F32 tensors, the raw context length.
  const auto m = GgufModel::open(t.gguf);
  const auto [f, file] = m->find("rope_factors_short.weight");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, static_cast<std::uint32_t>(GgmlType::kF32));
  EXPECT_EQ(f->dims, std::vector<std::uint64_t>{6});
  EXPECT_EQ(m->metadata().get_uint("phi3.context_length"), 2048u);
  EXPECT_EQ(m->metadata().get_uint("phi3.rope.dimension_count"), 12u);
  EXPECT_EQ(m->metadata().get_uint("phi3.rope.scaling.original_context_length"), 512u);
  EXPECT_GT(m->metadata().get_float("phi3.rope.scaling.attn_factor"), 1.0);
  // A split set of 3 (the factor tensors in the first shard) loads the same model from
  // its last shard.
  const std::string split = testing::scratch_dir("g-phi3-longrope-split") + "/m.gguf";
  const auto files = devtools::write_gguf_model(t.hf_dir, split, 3);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(canonical_config_text(config_of(files[2])), canonical_config_text(g));
  EXPECT_EQ(testing::logits_of(files[2], 40), testing::logits_of(t.hf_dir, 40));
}

// A config attention_factor other than the derived one travels in rope.scaling.attn_factor.
TEST(GgufArch, Phi3ExplicitAttentionFactorIsKept) {
  const auto t = phi3_gguf("g-phi3-attn", [](json& c) {
    longrope(c);
    c["rope_scaling"]["attention_factor"] = 1.25;
  });
  EXPECT_EQ(config_of(t.gguf).rope_scaling.attention_factor, 1.25);
  expect_same_model(t);
}

// The factors are stored as f32 (as llama.cpp does): a factor that is no f32 value comes
// back rounded.
TEST(GgufArch, Phi3FactorsAreStoredAsF32) {
  const auto t = phi3_gguf("g-phi3-round", [](json& c) {
    longrope(c);
    c["rope_scaling"]["short_factor"][1] = 1.9;
  });
  EXPECT_EQ(config_of(t.gguf).rope_scaling.short_factor[1], static_cast<double>(1.9f));
  EXPECT_NE(load_model_config(t.hf_dir).rope_scaling.short_factor[1], static_cast<double>(1.9f));
}

TEST(GgufArch, Phi3SlidingWindowAndFullRotary) {
  const auto t = phi3_gguf("g-phi3-window", [](json& c) {
    c["sliding_window"] = 300;
    c.erase("partial_rotary_factor");
  });
  const ModelConfig g = config_of(t.gguf);
  EXPECT_EQ(g.sliding_window, 300);
  EXPECT_EQ(g.max_position_embeddings, 2048);  // masked exactly: no cap
  EXPECT_EQ(g.sliding_layers, std::vector<std::uint8_t>(static_cast<std::size_t>(g.num_layers), 1));
  EXPECT_EQ(g.partial_rotary_dim, 0);
  expect_same_model(t, 12);
  EXPECT_EQ(GgufModel::open(t.gguf)->metadata().get_uint("phi3.attention.sliding_window"), 300u);
}

// llama.cpp's tensor names: no q/k permutation for either (NeoX-style RoPE), OLMo 2's
// norms after the sublayers, Phi-3's fused tensors as they are.
TEST(GgufArch, TensorNamesAndBytesAsLlamaCppWritesThem) {
  const auto olmo = testing::tiny_gguf(TinyArch::kOlmo2, core::DType::kF32, "g-olmo-names");
  const auto om = GgufModel::open(olmo.gguf);
  for (const char* n : {"blk.1.post_attention_norm.weight", "blk.1.post_ffw_norm.weight",
                        "blk.1.attn_q_norm.weight", "blk.1.attn_q.weight"}) {
    EXPECT_NE(om->find(n).first, nullptr) << n;
  }
  EXPECT_EQ(om->find("blk.1.ffn_norm.weight").first, nullptr);
  EXPECT_EQ(om->find("blk.1.attn_norm.weight").first, nullptr);
  EXPECT_EQ(om->find("blk.1.attn_q_norm.weight").first->dims,
            std::vector<std::uint64_t>{64});  // full width: 4 heads x 16

  const auto phi = testing::tiny_gguf(TinyArch::kPhi3, core::DType::kF32, "g-phi-names");
  const auto pm = GgufModel::open(phi.gguf);
  EXPECT_EQ(pm->find("blk.0.ffn_gate.weight").first, nullptr);
  EXPECT_EQ(pm->find("blk.0.ffn_up.weight").first->dims,
            (std::vector<std::uint64_t>{64, 256}));  // [gate | up] rows of 128 each
  const TensorStore store = TensorStore::open(phi.hf_dir);
  for (const auto& [hf, g] :
       {std::pair<const char*, const char*>{"model.layers.0.self_attn.qkv_proj.weight",
                                            "blk.0.attn_qkv.weight"},
        {"model.layers.0.mlp.gate_up_proj.weight", "blk.0.ffn_up.weight"}}) {
    const TensorRef& r = store.get(hf);
    ASSERT_EQ(pm->find(g).first->bytes, r.info->size());
    EXPECT_EQ(std::memcmp(pm->data(g), r.data(), r.info->size()), 0) << g;
  }
}

// ---- hostile phi3 / olmo2 files ------------------------------------------------------

using testing::edited;
using testing::expect_refused;
using testing::tensor_edit;

TEST(GgufArchHostile, Phi3LongropeErrorsNameTheKeyOrTensor) {
  const auto t = phi3_gguf("g-phi3-hostile", longrope);
  EXPECT_EQ(testing::logits_of(edited(t.gguf, {})), testing::logits_of(t.hf_dir));
  testing::GgufEdits no_orig;
  no_orig.metadata["phi3.rope.scaling.original_context_length"] = nullptr;
  expect_refused(edited(t.gguf, no_orig), ErrorCode::kNotFound,
                 "phi3.rope.scaling.original_context_length", "original_context_length");
  const std::string kShort = "rope_factors_short.weight";
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          auto* f = testing::tensor_named(ts, kShort);
                          f->dims = {5};
                          f->data.resize(20);
                        })),
                 ErrorCode::kCorrupt, kShort, "expected [6]");
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          auto* f = testing::tensor_named(ts, kShort);
                          f->dims = {6, 1};
                        })),
                 ErrorCode::kCorrupt, kShort, "expected [6]");
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          ts.erase(ts.begin() + (testing::tensor_named(ts, kShort) - ts.data()));
                        })),
                 ErrorCode::kNotFound, kShort, "missing");
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          auto* f = testing::tensor_named(ts, kShort);
                          f->type = static_cast<std::uint32_t>(GgmlType::kF16);
                          f->data.resize(12);
                        })),
                 ErrorCode::kUnsupported, kShort, "F16");
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          std::memset(testing::tensor_named(ts, kShort)->data.data() + 8, 0, 4);
                        })),
                 ErrorCode::kCorrupt, kShort, "[2] = 0");
  testing::GgufEdits yarn;
  yarn.metadata["phi3.rope.scaling.type"] = testing::set_string("yarn");
  expect_refused(edited(t.gguf, yarn), ErrorCode::kUnsupported, "phi3.rope.scaling.type", "yarn");
  testing::GgufEdits odd;
  odd.metadata["phi3.rope.dimension_count"] = testing::set_u32(11);
  expect_refused(edited(t.gguf, odd), ErrorCode::kCorrupt, "phi3.rope.dimension_count", "= 11");
  odd.metadata["phi3.rope.dimension_count"] = testing::set_u32(32);
  expect_refused(edited(t.gguf, odd), ErrorCode::kCorrupt, "phi3.rope.dimension_count", "= 32");
}

TEST(GgufArchHostile, Olmo2ErrorsNameTheKeyOrTensor) {
  const auto t = testing::tiny_gguf(TinyArch::kOlmo2, core::DType::kF32, "g-olmo-hostile");
  testing::GgufEdits window;
  window.metadata["olmo2.attention.sliding_window"] = testing::set_u32(64);
  expect_refused(edited(t.gguf, window), ErrorCode::kUnsupported, "olmo2.attention.sliding_window",
                 "OLMo 3");
  testing::GgufEdits partial;
  partial.metadata["olmo2.rope.dimension_count"] = testing::set_u32(8);
  expect_refused(edited(t.gguf, partial), ErrorCode::kUnsupported, "olmo2.rope.dimension_count",
                 "partial rotary");
  const std::string kNorm = "blk.1.post_ffw_norm.weight";
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          ts.erase(ts.begin() + (testing::tensor_named(ts, kNorm) - ts.data()));
                        })),
                 ErrorCode::kNotFound, "", kNorm);  // stream_weights: named in the message
  // A pre-norm tensor in an olmo2 file is not silently ignored.
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          testing::GgufTensorCopy c = *testing::tensor_named(ts, kNorm);
                          c.name = "blk.1.ffn_norm.weight";
                          ts.push_back(c);
                        })),
                 ErrorCode::kUnsupported, "blk.1.ffn_norm.weight", "not used");
  // rope factors in a file of another architecture are refused as unused.
  expect_refused(edited(t.gguf, tensor_edit([&](auto& ts) {
                          testing::GgufTensorCopy c = *testing::tensor_named(ts, kNorm);
                          c.name = "rope_factors_long.weight";
                          ts.push_back(c);
                        })),
                 ErrorCode::kUnsupported, "rope_factors_long.weight", "not used");
}

}  // namespace
}  // namespace detinfer::model
