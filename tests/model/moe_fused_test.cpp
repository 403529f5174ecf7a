// Mixture-of-experts checkpoints with fused 3-D expert tensors (transformers v5's layout,
// model/fused_experts.h): for Qwen3-MoE, Qwen2-MoE and Mixtral tiny models in f32, bf16 and
// f16, both fused layouts (gate_up_proj + down_proj; 3-D gate_proj / up_proj / down_proj)
// give logits over 40 positions bitwise equal to the per-expert checkpoint of the same
// weights, and the same model fingerprint, also quantized on load; each expert is a view of
// its rows of the mapped fused tensor; hostile fused checkpoints are errors naming the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "devtools/safetensors_writer.h"
#include "model/hostile_model.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/quant_scheme.h"
#include "model/tensor_store.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

using devtools::FusedExperts;
using devtools::TinyArch;

constexpr TinyArch kArchs[] = {TinyArch::kQwen3Moe, TinyArch::kQwen2Moe, TinyArch::kMixtral};

devtools::TinyModelOptions options(TinyArch arch, core::DType dtype, const std::string& dir,
                                   FusedExperts layout) {
  devtools::TinyModelOptions o = testing::tiny_options(arch, dtype, dir, 11);
  o.layers = 3;
  if (arch != TinyArch::kMixtral) o.mlp_only_layers = {1};  // a dense layer between
  o.fused_experts = layout;
  return o;
}

struct Checkpoints {
  std::string per_expert, fused;  // the same weights, stored both ways
};

// `whole_blocks`: every linear's rows are whole 32-weight blocks (Mixtral's experts and
// Qwen2-MoE's shared expert 64 wide), so that q8_0 on load takes them all.
Checkpoints checkpoints(TinyArch arch, core::DType dtype, FusedExperts layout,
                        bool whole_blocks = false) {
  const std::string name = str_cat(devtools::tiny_arch_name(arch), "-", core::to_string(dtype),
                                   layout == FusedExperts::kGateUp ? "-gate-up" : "-separate");
  Checkpoints c{testing::scratch_dir("fused-per-" + name), testing::scratch_dir("fused-" + name)};
  for (const auto& [dir, l] : {std::pair{c.per_expert, FusedExperts::kNone}, {c.fused, layout}}) {
    devtools::TinyModelOptions o = options(arch, dtype, dir, l);
    if (whole_blocks) {
      o.shared_expert_intermediate = 64;
      if (arch == TinyArch::kMixtral) o.intermediate = 64;
    }
    devtools::make_tiny_model(o);
  }
  return c;
}

// Every position's logits of one prefill, the weights quantized on load with `scheme` ("" =
// as stored).
std::vector<float> logits(const std::string& dir, const std::vector<std::int32_t>& tokens,
                          const std::string& scheme = "") {
  ModelOptions mo;
  if (!scheme.empty()) {
    QuantScheme q;
    EXPECT_TRUE(parse_quant_scheme(scheme, &q));
    mo.weights = q;
  }
  const auto m = Model::load(dir, mo);
  KvCachePool kv(m->config(), 16, std::int64_t{16} << 20);
  SequenceStep s;
  for (std::size_t b = 0; b < (tokens.size() + 15) / 16; ++b)
    s.block_table.push_back(kv.allocate());
  s.tokens = tokens;
  s.all_logits = true;
  std::vector<float> out;
  m->forward({s}, kv, out);
  return out;
}

TEST(MoeFused, LogitsAndFingerprintEqualThePerExpertCheckpoint) {
  const auto tokens = testing::test_tokens(40, 512, 4);
  for (const TinyArch arch : kArchs) {
    for (const core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
      for (const FusedExperts layout : {FusedExperts::kGateUp, FusedExperts::kSeparate}) {
        const Checkpoints c = checkpoints(arch, dtype, layout);
        const std::string what = c.fused;
        {
          const TensorStore store = TensorStore::open(c.fused);  // really fused
          EXPECT_NE(
              store.find(layout == FusedExperts::kGateUp ? "model.layers.2.mlp.experts.gate_up_proj"
                                                         : "model.layers.2.mlp.experts.up_proj"),
              nullptr)
              << what;
          for (const auto& entry : store.tensors()) {
            EXPECT_EQ(entry.first.find(".experts.0."), std::string::npos) << entry.first;
            EXPECT_EQ(entry.first.find("block_sparse_moe"), std::string::npos) << entry.first;
          }
        }
        const std::vector<float> want = logits(c.per_expert, tokens);
        ASSERT_EQ(want.size(), 40u * 512u);
        EXPECT_EQ(logits(c.fused, tokens), want) << what;
        EXPECT_EQ(Model::load(c.fused, {})->fingerprint(),
                  Model::load(c.per_expert, {})->fingerprint())
            << what;
      }
    }
  }
}

// Quantize-on-load reads the views as it reads per-expert tensors: the same blocks.
TEST(MoeFused, QuantizedOnLoadEqualsThePerExpertCheckpoint) {
  const auto tokens = testing::test_tokens(40, 512, 5);
  for (const TinyArch arch : kArchs) {
    const Checkpoints c = checkpoints(arch, core::DType::kBF16, FusedExperts::kGateUp, true);
    const std::vector<float> want = logits(c.per_expert, tokens, "q8_0");
    EXPECT_NE(want, logits(c.per_expert, tokens)) << "q8_0 changes nothing";
    EXPECT_EQ(logits(c.fused, tokens, "q8_0"), want) << c.fused;
  }
}

// Each expert tensor is its rows of the fused tensor in the mapping (no copy), holding the
// bytes of the per-expert tensor it stands for; Mixtral's router is read from mlp.gate.
TEST(MoeFused, ExpertsAreViewsOfTheMappedFusedTensor) {
  for (const TinyArch arch : kArchs) {
    for (const FusedExperts layout : {FusedExperts::kGateUp, FusedExperts::kSeparate}) {
      const Checkpoints c = checkpoints(arch, core::DType::kBF16, layout);
      const ModelConfig config = load_model_config(c.fused);
      const TensorStore fused = TensorStore::open(c.fused);
      const TensorStore per = TensorStore::open(c.per_expert);
      const SafetensorsSource src(fused, config);
      int views = 0;
      for (const WeightSpec& s : required_weights(config)) {
        const bool router = arch == TinyArch::kMixtral && s.kind == WeightKind::kRouter;
        if (s.expert < 0 && !router) continue;
        const SourceTensor* v = src.find(s);
        ASSERT_NE(v, nullptr) << s.name;
        const TensorRef& whole = fused.get(v->name);
        EXPECT_NE(v->name, s.name);
        EXPECT_EQ(v->fingerprint_name, s.name);
        EXPECT_GE(v->data(), whole.data()) << s.name;
        EXPECT_LE(v->data() + v->bytes, whole.data() + whole.info->size()) << s.name;
        EXPECT_GE(v->data(), whole.file->data());
        EXPECT_LE(v->data() + v->bytes, whole.file->data() + whole.file->size());
        EXPECT_EQ(v->shape, s.shape);
        const TensorRef& own = per.get(s.name);
        ASSERT_EQ(v->bytes, own.info->size()) << s.name;
        EXPECT_EQ(std::memcmp(v->data(), own.data(), v->bytes), 0) << s.name;
        views += router ? 0 : 1;
      }
      const int sparse_layers = arch == TinyArch::kMixtral ? 3 : 2;
      EXPECT_EQ(views, sparse_layers * 8 * 3);
    }
  }
}

// The error loading `dir` after rewrite_weights(dir, edit): its code, and that the message
// and field name `tensor`.
ErrorCode fused_error(const std::string& dir,
                      const std::function<bool(devtools::TensorEntry&)>& edit,
                      const std::string& tensor) {
  const Error e = testing::load_error(dir, edit);
  EXPECT_NE(e.message().find(tensor), std::string::npos) << e.message();
  EXPECT_EQ(e.field(), tensor) << e.message();
  return e.code();
}

std::string fused_model(TinyArch arch, FusedExperts layout, const std::string& name) {
  const std::string dir = testing::scratch_dir("fused-hostile-" + name);
  devtools::make_tiny_model(options(arch, core::DType::kF32, dir, layout));
  return dir;
}

// Renames tensor `from` to `to` with `shape` (its first values, zero-padded).
std::function<bool(devtools::TensorEntry&)> renamed(const std::string& from, const std::string& to,
                                                    std::vector<std::int64_t> shape) {
  return [=](devtools::TensorEntry& e) {
    if (e.name == from) {
      e.name = to;
      e.shape = shape;
    }
    return true;
  };
}

std::function<bool(devtools::TensorEntry&)> reshape(const std::string& name,
                                                    std::vector<std::int64_t> shape) {
  return renamed(name, name, std::move(shape));
}

TEST(MoeFusedHostile, WrongShapesAndExpertCountsAreNamed) {
  const std::string gu = "model.layers.0.mlp.experts.gate_up_proj";
  const std::string down = "model.layers.2.mlp.experts.down_proj";
  // Qwen3-MoE: 8 experts of 32 x 64.
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen3Moe, FusedExperts::kGateUp, "rows"),
                        reshape(gu, {8, 66, 64}), gu),
            ErrorCode::kCorrupt);
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen3Moe, FusedExperts::kGateUp, "count"),
                        reshape(gu, {7, 64, 64}), gu),
            ErrorCode::kCorrupt);
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen3Moe, FusedExperts::kGateUp, "rank"),
                        reshape(gu, {8 * 64, 64}), gu),
            ErrorCode::kCorrupt);
  // Stored [experts, in, out] (as Llama 4 / GPT-OSS store theirs): refused, not misread.
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen3Moe, FusedExperts::kGateUp, "t-down"),
                        reshape(down, {8, 32, 64}), down),
            ErrorCode::kUnsupported);
  // Mixtral: 8 experts of 48 x 64.
  EXPECT_EQ(fused_error(fused_model(TinyArch::kMixtral, FusedExperts::kGateUp, "t-gate-up"),
                        reshape(gu, {8, 64, 96}), gu),
            ErrorCode::kUnsupported);
  EXPECT_EQ(fused_error(fused_model(TinyArch::kMixtral, FusedExperts::kSeparate, "count-up"),
                        reshape("model.layers.1.mlp.experts.up_proj", {9, 48, 64}),
                        "model.layers.1.mlp.experts.up_proj"),
            ErrorCode::kCorrupt);
}

TEST(MoeFusedHostile, MissingHalvesAreNamed) {
  auto drop = [](const std::string& name) {
    return [name](devtools::TensorEntry& e) { return e.name != name; };
  };
  const std::string down = "model.layers.2.mlp.experts.down_proj";
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen2Moe, FusedExperts::kGateUp, "no-down"),
                        drop(down), down),
            ErrorCode::kNotFound);
  const std::string up = "model.layers.0.mlp.experts.up_proj";
  EXPECT_EQ(
      fused_error(fused_model(TinyArch::kQwen3Moe, FusedExperts::kSeparate, "no-up"), drop(up), up),
      ErrorCode::kNotFound);
}

TEST(MoeFusedHostile, MixedLayoutsAreNamed) {
  // Layer 0: per-expert gate / up with a fused down_proj (expert 3's down renamed).
  const std::string down = "model.layers.0.mlp.experts.down_proj";
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen3Moe, FusedExperts::kNone, "mixed-layer"),
                        renamed("model.layers.0.mlp.experts.3.down_proj.weight", down, {8, 64, 32}),
                        down),
            ErrorCode::kCorrupt);
  // gate_up_proj beside a 3-D up_proj.
  const std::string gu = "model.layers.2.mlp.experts.gate_up_proj";
  EXPECT_EQ(fused_error(fused_model(TinyArch::kQwen2Moe, FusedExperts::kSeparate, "both"),
                        renamed("model.layers.2.mlp.experts.gate_proj", gu, {8, 64, 64}), gu),
            ErrorCode::kCorrupt);
  // Mixtral experts fused under block_sparse_moe: no layout transformers writes.
  const std::string bsm = "model.layers.1.block_sparse_moe.experts.gate_up_proj";
  EXPECT_EQ(fused_error(fused_model(TinyArch::kMixtral, FusedExperts::kGateUp, "bsm"),
                        renamed("model.layers.1.mlp.experts.gate_up_proj", bsm, {8, 96, 64}), bsm),
            ErrorCode::kUnsupported);
}

// Layer 0 fused, layer 2 per expert: one checkpoint, two layouts.
TEST(MoeFusedHostile, LayersOfBothLayoutsAreNamed) {
  const Checkpoints c = checkpoints(TinyArch::kQwen3Moe, core::DType::kF32, FusedExperts::kGateUp);
  std::vector<devtools::TensorEntry> entries;
  std::vector<std::vector<std::uint8_t>> bytes;
  {
    const TensorStore fused = TensorStore::open(c.fused), per = TensorStore::open(c.per_expert);
    const std::string layer2 = "model.layers.2.mlp.experts.";
    for (const TensorStore* s : {&fused, &per}) {
      for (const auto& [name, ref] : s->tensors()) {
        if ((name.compare(0, layer2.size(), layer2) == 0) != (s == &per)) continue;
        entries.push_back({name, ref.info->dtype, ref.info->shape});
        bytes.emplace_back(ref.data(), ref.data() + ref.info->size());
      }
    }
  }
  devtools::write_safetensors(c.fused + "/model.safetensors", entries,
                              [&](const devtools::TensorEntry& e, std::vector<std::uint8_t>& b) {
                                for (std::size_t i = 0; i < entries.size(); ++i) {
                                  if (entries[i].name == e.name) b = bytes[i];
                                }
                              });
  try {
    Model::load(c.fused, {});
    ADD_FAILURE() << "two layouts loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.field(), "model.layers.0.mlp.experts.gate_up_proj") << e.message();
    EXPECT_NE(e.message().find("model.layers.2.mlp.experts.0."), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace detinfer::model
