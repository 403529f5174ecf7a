// Mixture-of-experts safetensors checkpoints whose experts are fused into 3-D tensors, as
// transformers v5 holds them (Qwen3MoeExperts / Qwen2MoeExperts / MixtralExperts: one
// nn.Parameter per projection over all experts; save_pretrained(save_original_format=False)
// writes them so; conversion_mapping.py maps the per-expert names onto them):
//
//   model.layers.L.mlp.experts.gate_up_proj  [num_experts, 2 * inter, hidden]  gate rows, then up
//   model.layers.L.mlp.experts.down_proj     [num_experts, hidden, inter]
//
// or, instead of gate_up_proj, a 3-D gate_proj / up_proj pair [num_experts, inter, hidden].
// Mixtral's fused layers sit under mlp. (its router renamed block_sparse_moe.gate ->
// mlp.gate). Each expert's projection is a view of its rows of the mapping (no copy), under
// the per-expert name the model asks for (docs/models.md, "Fused expert tensors").
#pragma once

#include <map>
#include <set>
#include <string>

#include "model/model_config.h"
#include "model/tensor_source.h"
#include "model/tensor_store.h"

namespace detinfer::model {

// For every sparse layer of `config` whose experts `store` holds fused: a view per expert
// tensor (and, for Mixtral, the router stored as mlp.gate.weight), keyed by the per-expert
// (Hugging Face) name required_weights() gives it; the stored tensors read go to `used`.
// Each view's fingerprint_name is that per-expert name, so a fused checkpoint has the
// fingerprint of the per-expert checkpoint of the same weights. Layers stored per expert
// add nothing. Throws Error naming the tensor: a layer (or checkpoint) mixing fused and
// per-expert tensors, or gate_up_proj with gate_proj / up_proj (kCorrupt); a fused tensor of
// the wrong rank, expert count or shape (kCorrupt); one stored transposed ([experts, in,
// out], Llama 4 / GPT-OSS style) or Mixtral experts fused under block_sparse_moe.
// (kUnsupported: no transformers code writes them for these architectures); a missing half
// of a layout (kNotFound).
void add_fused_expert_views(const ModelConfig& config, const TensorStore& store,
                            std::map<std::string, SourceTensor>& views,
                            std::set<std::string>& used);

}  // namespace detinfer::model
