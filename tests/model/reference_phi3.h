// transformers' Phi-3 (modeling_phi3: Phi3Attention, Phi3MLP, apply_rotary_pos_emb) in
// float64, for the model tests: qkv_proj's output is [q | k | v] (num_heads * head_dim,
// then num_kv_heads * head_dim twice); gate_up_proj's is [gate | up] (chunk(2) of the
// last dimension: gate first); RoPE rotates the first int(head_dim * partial_rotary_factor)
// dimensions of each head; longrope's short factors and attention factor come from
// reference_rope.h. Otherwise the Llama layer of reference_forward.h. Written from the
// Hugging Face modules, independent of src/model.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/reference_forward.h"

namespace detinfer::testing {

class ReferencePhi3 : public ReferenceModel {
 public:
  // What the "feature removed" models change (the test checks detinfer is far from them).
  enum class Ablation {
    kNone,
    kFullRotary,     // partial_rotary_factor ignored: every dimension rotates
    kNoScaling,      // rope_scaling (longrope) ignored
    kSwappedGateUp,  // gate_up_proj read as [up | gate]
  };

  explicit ReferencePhi3(const std::string& dir, Ablation ablation = Ablation::kNone)
      : ReferenceModel(dir, ablation == Ablation::kNoScaling, ablation == Ablation::kFullRotary) {
    const std::size_t h = static_cast<std::size_t>(hidden_);
    const std::size_t qd = static_cast<std::size_t>(heads_ * head_dim_) * h;
    const std::size_t kd = static_cast<std::size_t>(kv_heads_ * head_dim_) * h;
    const std::size_t inter = static_cast<std::size_t>(inter_) * h;
    for (int l = 0; l < layers_; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const std::vector<double>& qkv = w(p + "self_attn.qkv_proj.weight");
      w_[p + "self_attn.q_proj.weight"].assign(qkv.begin(), qkv.begin() + qd);
      w_[p + "self_attn.k_proj.weight"].assign(qkv.begin() + qd, qkv.begin() + qd + kd);
      w_[p + "self_attn.v_proj.weight"].assign(qkv.begin() + qd + kd, qkv.end());
      const std::vector<double>& gu = w(p + "mlp.gate_up_proj.weight");
      std::vector<double> gate(gu.begin(), gu.begin() + inter), up(gu.begin() + inter, gu.end());
      if (ablation == Ablation::kSwappedGateUp) std::swap(gate, up);
      w_[p + "mlp.gate_proj.weight"] = std::move(gate);
      w_[p + "mlp.up_proj.weight"] = std::move(up);
    }
  }
};

}  // namespace detinfer::testing
