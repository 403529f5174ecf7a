// Mixture-of-experts tensors of GGUF files (docs/gguf.md, "Mixture of experts"): llama.cpp's
// names, and each expert as a view of its rows of the stacked 3-D tensor (no copy).
#include <utility>

#include "core/check.h"
#include "model/gguf_internal.h"

namespace detinfer::model::gguf_internal {
namespace {

// The GGUF name of expert tensors of `kind` in older Mixtral files, one 2-D tensor per
// expert (blk.N.ffn_gate.E.weight), and the stacked name's stem.
const char* expert_stem(WeightKind kind) {
  switch (kind) {
    case WeightKind::kExpertGate:
      return "ffn_gate";
    case WeightKind::kExpertUp:
      return "ffn_up";
    case WeightKind::kExpertDown:
      return "ffn_down";
    default:
      return nullptr;
  }
}

std::string dims_str(const std::vector<std::uint64_t>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += str_cat(i ? ", " : "", dims[i]);
  return "[" + s + "]";
}

}  // namespace

std::string moe_tensor_name(const std::string& rest, const std::string& layer) {
  static const std::pair<const char*, const char*> kNames[] = {
      // Qwen3-MoE / Qwen2-MoE
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      // Mixtral
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
  };
  for (const auto& [h, g] : kNames) {
    if (rest == h) return "blk." + layer + "." + g;
  }
  // experts.E.<projection>: the stacked tensor of all experts.
  static const std::pair<const char*, const char*> kExperts[] = {
      {"gate_proj.weight", "ffn_gate_exps.weight"}, {"up_proj.weight", "ffn_up_exps.weight"},
      {"down_proj.weight", "ffn_down_exps.weight"}, {"w1.weight", "ffn_gate_exps.weight"},
      {"w3.weight", "ffn_up_exps.weight"},          {"w2.weight", "ffn_down_exps.weight"},
  };
  for (const char* prefix : {"mlp.experts.", "block_sparse_moe.experts."}) {
    const std::string p = prefix;
    if (rest.compare(0, p.size(), p) != 0) continue;
    const std::size_t dot = rest.find('.', p.size());
    if (dot == std::string::npos) return "";
    const std::string proj = rest.substr(dot + 1);
    for (const auto& [h, g] : kExperts) {
      if (proj == h) return "blk." + layer + "." + g;
    }
  }
  return "";
}

bool expert_source(const GgufModel& g, const WeightSpec& spec, const std::string& stacked,
                   std::int64_t num_experts, SourceTensor& out) {
  const char* stem = expert_stem(spec.kind);
  if (stem == nullptr) return false;
  const GgufTensor* t = g.find(stacked).first;
  if (t == nullptr) {  // older Mixtral files: one 2-D tensor per expert
    return source_tensor(g, str_cat("blk.", spec.layer, ".", stem, ".", spec.expert, ".weight"),
                         out);
  }
  // ggml dims [cols, rows, experts]: expert e's rows are the e-th of `experts` equal parts
  // (whole rows, so whole blocks of a quantized type).
  const std::int64_t experts = num_experts;
  const std::vector<std::uint64_t> want = {static_cast<std::uint64_t>(spec.shape[1]),
                                           static_cast<std::uint64_t>(spec.shape[0]),
                                           static_cast<std::uint64_t>(experts)};
  if (t->dims != want) {
    throw Error(
        ErrorCode::kCorrupt,
        str_cat("tensor '", stacked, "' in ", g.where(), " has dims ", dims_str(t->dims),
                " but the metadata implies ", dims_str(want), " ([columns, rows, expert_count])"),
        stacked);
  }
  source_tensor(g, stacked, out);
  const std::uint64_t each = t->bytes / static_cast<std::uint64_t>(experts);
  out.file_offset += each * static_cast<std::uint64_t>(spec.expert);
  out.bytes = each;
  out.shape = spec.shape;
  return true;
}

}  // namespace detinfer::model::gguf_internal
