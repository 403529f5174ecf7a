// detinfer::devtools::fuse_expert_tensors: a per-expert mixture-of-experts folder rewritten
// with its experts fused into 3-D tensors, as transformers v5 holds them (model/fused_experts.h).
#include <sys/stat.h>

#include <map>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "devtools/model_tools.h"
#include "devtools/safetensors_writer.h"
#include "model/model_config.h"
#include "model/tensor_store.h"
#include "model/weight_loader.h"

namespace detinfer::devtools {
namespace {

struct Stored {
  TensorEntry entry;
  std::vector<std::uint8_t> bytes;
};

using Tensors = std::map<std::string, Stored>;

// Removes tensor `name` from `t` and appends its bytes to `to` (whose dtype it must share).
void move_into(Tensors& t, const std::string& name, Stored& to) {
  const auto it = t.find(name);
  if (it == t.end()) fail(ErrorCode::kNotFound, "fuse_expert_tensors: no tensor '", name, "'");
  if (to.bytes.empty()) to.entry.dtype = it->second.entry.dtype;
  if (it->second.entry.dtype != to.entry.dtype) {
    fail(ErrorCode::kInvalidArgument, "fuse_expert_tensors: '", name, "' is not ",
         core::to_string(to.entry.dtype), " as the experts before it");
  }
  to.bytes.insert(to.bytes.end(), it->second.bytes.begin(), it->second.bytes.end());
  t.erase(it);
}

// Layer l's experts fused: gate_up_proj (expert by expert: its gate rows, then its up rows)
// or a gate_proj / up_proj pair, and down_proj; Mixtral's router renamed mlp.gate.
void fuse_layer(
    const model::ModelConfig& c, std::int64_t l,
    const std::map<std::tuple<std::int64_t, model::WeightKind, std::int64_t>, std::string>& names,
    FusedExperts layout, Tensors& t) {
  const std::int64_t e = c.moe.num_experts, in = c.moe.intermediate_size, h = c.hidden_size;
  const std::string p = str_cat("model.layers.", l, ".mlp.experts.");
  auto name = [&](model::WeightKind k, std::int64_t x) { return names.at({l, k, x}); };
  Stored gate{{p + (layout == FusedExperts::kGateUp ? "gate_up_proj" : "gate_proj"),
               core::DType::kF32,
               {e, layout == FusedExperts::kGateUp ? 2 * in : in, h}},
              {}};
  Stored up{{p + "up_proj", core::DType::kF32, {e, in, h}}, {}};
  Stored down{{p + "down_proj", core::DType::kF32, {e, h, in}}, {}};
  for (std::int64_t x = 0; x < e; ++x) {
    move_into(t, name(model::WeightKind::kExpertGate, x), gate);
    move_into(t, name(model::WeightKind::kExpertUp, x),
              layout == FusedExperts::kGateUp ? gate : up);
    move_into(t, name(model::WeightKind::kExpertDown, x), down);
  }
  for (Stored* s : {&gate, &up, &down}) {
    if (!s->bytes.empty()) t[s->entry.name] = std::move(*s);
  }
  if (c.architecture == model::Architecture::kMixtral) {
    const std::string from = str_cat("model.layers.", l, ".block_sparse_moe.gate.weight");
    Stored router = std::move(t.at(from));
    t.erase(from);
    router.entry.name = str_cat("model.layers.", l, ".mlp.gate.weight");
    t[router.entry.name] = std::move(router);
  }
}

}  // namespace

FusedExperts parse_fused_experts(const std::string& name) {
  if (name == "none") return FusedExperts::kNone;
  if (name == "gate_up") return FusedExperts::kGateUp;
  if (name == "separate") return FusedExperts::kSeparate;
  fail(ErrorCode::kInvalidArgument, "unknown fused-experts layout '", name,
       "' (none, gate_up, separate)");
}

void fuse_expert_tensors(const std::string& dir, FusedExperts layout) {
  if (layout == FusedExperts::kNone) return;
  const model::ModelConfig c = model::load_model_config(dir);
  if (c.moe.num_experts == 0) {
    fail(ErrorCode::kInvalidArgument, "fuse_expert_tensors: ", dir,
         " is not a mixture-of-experts model");
  }
  struct stat st {};
  if (::stat((dir + "/model.safetensors.index.json").c_str(), &st) == 0) {
    fail(ErrorCode::kInvalidArgument, "fuse_expert_tensors: ", dir,
         " is sharded; only a single model.safetensors is rewritten");
  }
  Tensors t;
  {
    const model::TensorStore store = model::TensorStore::open(dir);
    for (const auto& [name, ref] : store.tensors()) {
      t[name] = Stored{{name, ref.info->dtype, ref.info->shape},
                       std::vector<std::uint8_t>(ref.data(), ref.data() + ref.info->size())};
    }
  }  // unmapped before the file is rewritten
  std::map<std::tuple<std::int64_t, model::WeightKind, std::int64_t>, std::string> names;
  for (const model::WeightSpec& s : model::required_weights(c)) {
    if (s.expert >= 0) names[{s.layer, s.kind, s.expert}] = s.name;
  }
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (model::is_moe_layer(c, l)) fuse_layer(c, l, names, layout, t);
  }
  std::vector<TensorEntry> entries;
  for (const auto& [name, s] : t) entries.push_back(s.entry);
  write_safetensors(
      dir + "/model.safetensors", entries,
      [&](const TensorEntry& e, std::vector<std::uint8_t>& bytes) { bytes = t.at(e.name).bytes; });
}

}  // namespace detinfer::devtools
