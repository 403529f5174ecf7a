#include "model/fused_experts.h"

#include <utility>
#include <vector>

#include "core/check.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

// The fused names transformers v5 gives a layer's experts (after "model.layers.L.mlp.experts.").
constexpr const char* kFusedNames[] = {"gate_up_proj", "gate_proj", "up_proj", "down_proj"};

bool is_expert_kind(WeightKind k) {
  return k == WeightKind::kExpertGate || k == WeightKind::kExpertUp || k == WeightKind::kExpertDown;
}

std::string dims(const std::vector<std::int64_t>& s) {
  std::string out;
  for (const std::int64_t d : s) out += str_cat(out.empty() ? "" : ", ", d);
  return "[" + out + "]";
}

// One sparse layer's fused tensors, checked against the config.
class FusedLayer {
 public:
  FusedLayer(const ModelConfig& c, std::int64_t layer, const TensorStore& store)
      : c_(c), store_(store), prefix_(str_cat("model.layers.", layer, ".mlp.experts.")) {}

  // Checks the layout and shapes, then adds a view per expert tensor of `specs`.
  void add_views(const std::vector<const WeightSpec*>& specs,
                 std::map<std::string, SourceTensor>& views, std::set<std::string>& used) const {
    const std::int64_t e = c_.moe.num_experts, in = c_.moe.intermediate_size, h = c_.hidden_size;
    const TensorRef* gate_up = find("gate_up_proj");
    const TensorRef* gate = find("gate_proj");
    const TensorRef* up = find("up_proj");
    const TensorRef* down = find("down_proj");
    if (gate_up != nullptr && (gate != nullptr || up != nullptr)) {
      throw Error(ErrorCode::kCorrupt,
                  str_cat("tensor '", name("gate_up_proj"), "' in ", gate_up->file->path(),
                          " and a fused '", name(gate != nullptr ? "gate_proj" : "up_proj"),
                          "' both hold the layer's gate projections (one layout or the other)"),
                  name("gate_up_proj"));
    }
    if (gate_up == nullptr) {
      if (gate == nullptr && up == nullptr) missing("gate_up_proj");
      if (gate == nullptr) missing("gate_proj");
      if (up == nullptr) missing("up_proj");
    }
    if (down == nullptr) missing("down_proj");
    check("down_proj", *down, {e, h, in});
    if (gate_up != nullptr) {
      check("gate_up_proj", *gate_up, {e, 2 * in, h});
    } else {
      check("gate_proj", *gate, {e, in, h});
      check("up_proj", *up, {e, in, h});
    }
    for (const WeightSpec* s : specs) {
      const std::int64_t x = s->expert;
      if (s->kind == WeightKind::kExpertDown) {
        add(views, *s, "down_proj", *down, x * h * in);
      } else if (gate_up != nullptr) {  // expert x: its gate rows, then its up rows
        const std::int64_t up_rows = s->kind == WeightKind::kExpertUp ? in : 0;
        add(views, *s, "gate_up_proj", *gate_up, (x * 2 * in + up_rows) * h);
      } else {
        const bool is_up = s->kind == WeightKind::kExpertUp;
        add(views, *s, is_up ? "up_proj" : "gate_proj", is_up ? *up : *gate, x * in * h);
      }
    }
    for (const char* n : kFusedNames) {
      if (find(n) != nullptr) used.insert(name(n));
    }
  }

  // The first fused tensor of the layer, or "".
  std::string any() const {
    for (const char* n : kFusedNames) {
      if (find(n) != nullptr) return name(n);
    }
    return "";
  }

 private:
  std::string name(const char* n) const { return prefix_ + n; }
  const TensorRef* find(const char* n) const { return store_.find(name(n)); }

  [[noreturn]] void missing(const char* n) const {
    throw Error(ErrorCode::kNotFound,
                str_cat("tensor '", name(n), "' is missing from ", store_.source(), " (", any(),
                        " holds the layer's experts fused)"),
                name(n));
  }

  // [experts, rows, cols] as stored: the expert count, then the orientation, then the shape.
  void check(const char* n, const TensorRef& t, const std::vector<std::int64_t>& want) const {
    const std::vector<std::int64_t>& s = t.info->shape;
    const std::string where =
        str_cat("tensor '", name(n), "' in ", t.file->path(), " has shape ", dims(s), " but ");
    const char* key =
        c_.architecture == Architecture::kMixtral ? "num_local_experts" : "num_experts";
    if (s.size() != 3 || s[0] != want[0]) {
      throw Error(ErrorCode::kCorrupt,
                  str_cat(where, "config.json implies ", dims(want), " ([", key,
                          ", out, in]: one matrix per expert)"),
                  name(n));
    }
    if (want[1] != want[2] && s[1] == want[2] && s[2] == want[1]) {
      throw Error(ErrorCode::kUnsupported,
                  str_cat(where, "detinfer reads ", dims(want),
                          ": the transposed layout ([experts, in, out], as Llama 4 / GPT-OSS store "
                          "it) is not one transformers writes for ",
                          to_string(c_.architecture)),
                  name(n));
    }
    if (s != want) {
      throw Error(ErrorCode::kCorrupt, str_cat(where, "config.json implies ", dims(want)), name(n));
    }
  }

  // A view of `spec`'s rows of the fused tensor `n`, starting `first` elements in.
  void add(std::map<std::string, SourceTensor>& views, const WeightSpec& spec, const char* n,
           const TensorRef& t, std::int64_t first) const {
    SourceTensor v = as_source_tensor(name(n), t);
    const std::uint64_t elem = core::dtype_size(t.info->dtype);
    std::uint64_t numel = 1;
    for (const std::int64_t d : spec.shape) numel *= static_cast<std::uint64_t>(d);
    v.file_offset += static_cast<std::uint64_t>(first) * elem;
    v.bytes = numel * elem;
    v.shape = spec.shape;
    v.fingerprint_name = spec.name;
    views[spec.name] = std::move(v);
  }

  const ModelConfig& c_;
  const TensorStore& store_;
  std::string prefix_;
};

// Mixtral: experts fused under block_sparse_moe. are no layout transformers writes.
void refuse_block_sparse_fused(std::int64_t layer, const TensorStore& store) {
  for (const char* n : kFusedNames) {
    const std::string bad = str_cat("model.layers.", layer, ".block_sparse_moe.experts.", n);
    if (store.find(bad) == nullptr) continue;
    throw Error(ErrorCode::kUnsupported,
                str_cat("tensor '", bad, "' in ", store.source(),
                        ": Mixtral's fused experts are read as transformers v5 names them, "
                        "model.layers.N.mlp.experts.{gate_up_proj,down_proj}"),
                bad);
  }
}

// Mixtral's router in a fused layer: transformers v5 renames block_sparse_moe.gate to mlp.gate.
void add_router_alias(const WeightSpec& router, const TensorStore& store,
                      std::map<std::string, SourceTensor>& views, std::set<std::string>& used) {
  const std::string alias = str_cat("model.layers.", router.layer, ".mlp.gate.weight");
  const TensorRef* a = store.find(alias);
  if (a == nullptr) return;  // stream_weights reads (or misses) block_sparse_moe.gate.weight
  if (store.find(router.name) != nullptr) {
    throw Error(ErrorCode::kCorrupt,
                str_cat("tensor '", alias, "' in ", a->file->path(), " and '", router.name,
                        "' both hold layer ", router.layer, "'s router"),
                alias);
  }
  SourceTensor v = as_source_tensor(alias, *a);
  v.fingerprint_name = router.name;
  views[router.name] = std::move(v);
  used.insert(alias);
}

[[noreturn]] void refuse_mix(const std::string& fused, const std::string& per_expert) {
  throw Error(ErrorCode::kCorrupt,
              str_cat("the checkpoint mixes fused expert tensors ('", fused,
                      "') with per-expert ones ('", per_expert, "'): one layout or the other"),
              fused);
}

}  // namespace

void add_fused_expert_views(const ModelConfig& config, const TensorStore& store,
                            std::map<std::string, SourceTensor>& views,
                            std::set<std::string>& used) {
  if (config.moe.num_experts == 0) return;
  const bool mixtral = config.architecture == Architecture::kMixtral;
  const std::vector<WeightSpec> specs = required_weights(config);
  std::map<std::int64_t, std::vector<const WeightSpec*>> experts;  // by layer
  std::map<std::int64_t, const WeightSpec*> routers;
  for (const WeightSpec& s : specs) {
    if (is_expert_kind(s.kind)) experts[s.layer].push_back(&s);
    if (s.kind == WeightKind::kRouter) routers[s.layer] = &s;
  }
  std::string fused_seen, per_expert_seen;  // one tensor of each layout, when present
  for (const auto& [layer, list] : experts) {
    if (mixtral) refuse_block_sparse_fused(layer, store);
    const FusedLayer fused(config, layer, store);
    const std::string f = fused.any();
    std::string per_expert;
    for (const WeightSpec* s : list) {
      if (per_expert.empty() && store.find(s->name) != nullptr) per_expert = s->name;
    }
    if (!f.empty() && !per_expert.empty()) refuse_mix(f, per_expert);
    if (f.empty()) {
      if (!per_expert.empty()) per_expert_seen = per_expert;
      continue;  // per expert (or missing: stream_weights names the tensor)
    }
    fused_seen = f;
    fused.add_views(list, views, used);
    if (mixtral) add_router_alias(*routers.at(layer), store, views, used);
  }
  if (!fused_seen.empty() && !per_expert_seen.empty()) refuse_mix(fused_seen, per_expert_seen);
}

}  // namespace detinfer::model
