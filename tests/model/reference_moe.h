// transformers' mixture-of-experts decoder layers (modeling_qwen3_moe: Qwen3MoeDecoderLayer,
// Qwen3MoeSparseMoeBlock; modeling_mixtral: MixtralDecoderLayer, MixtralSparseMoeBlock) in
// float64, for the model tests. The attention half is the Llama family's pre-norm layer
// (Qwen3-MoE with Qwen3's per-head q/k norm). The sparse block:
//   router_logits = gate(h); p = softmax(router_logits); top-k of p (ties: lowest index);
//   if norm_topk_prob (Mixtral: always): w = topk / sum(topk);
//   out = sum over the chosen experts e of w_e * down_e(silu(gate_e(h)) * up_e(h)).
// Qwen3-MoE layers listed in mlp_only_layers (or off decoder_sparse_step) are dense MLPs.
// Qwen2-MoE (modeling_qwen2_moe: Qwen2MoeSparseMoeBlock) adds a shared expert to every row:
//   out += sigmoid(shared_expert_gate(h)) * shared_expert(h); attention as Qwen2 (q/k/v biases).
// Written from the Hugging Face modules, independent of src/model.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "model/reference_forward.h"

namespace detinfer::testing {

class ReferenceMoe : public ReferenceModel {
 public:
  // What the "feature removed" models change (the test checks detinfer is far from them).
  enum class Ablation {
    kNone,
    kTieHighestIndex,  // ties in top-k go to the highest expert index
    kNoNormTopk,       // the top-k probabilities are used without renormalization
    kTop1,             // only the best expert (top-1 instead of top-k)
    kReversedWeights,  // the chosen experts' weights applied in reverse rank order
    kNoSharedExpert,   // Qwen2-MoE without its shared expert
    kUngatedShared,    // Qwen2-MoE's shared expert added without its sigmoid gate
  };

  explicit ReferenceMoe(const std::string& dir, Ablation ablation = Ablation::kNone)
      : ReferenceModel(dir), ablation_(ablation) {
    std::ifstream in(dir + "/config.json");
    const nlohmann::json c = nlohmann::json::parse(in);
    mixtral_ = arch_ == "MixtralForCausalLM";
    qwen2_ = arch_ == "Qwen2MoeForCausalLM";
    experts_ =
        mixtral_ ? c.value("num_local_experts", 8) : c.value("num_experts", qwen2_ ? 60 : 128);
    top_k_ = c.value("num_experts_per_tok", mixtral_ ? 2 : qwen2_ ? 4 : 8);
    norm_ = mixtral_ || c.value("norm_topk_prob", false);
    const int step = mixtral_ ? 1 : c.value("decoder_sparse_step", 1);
    std::vector<int> only;
    if (!mixtral_ && c.contains("mlp_only_layers"))
      only = c["mlp_only_layers"].get<std::vector<int>>();
    for (int l = 0; l < layers_; ++l) {
      const bool dense = std::find(only.begin(), only.end(), l) != only.end();
      sparse_.push_back(!dense && (l + 1) % step == 0);
    }
  }

  // Rows each expert has received so far (every sparse layer, every logits() call).
  std::vector<int> expert_rows() const { return hits_; }

 protected:
  void layer(const std::string& p, Rows& x) const override {
    const int t_count = static_cast<int>(x.size());
    const int qd = heads_ * head_dim_, kd = kv_heads_ * head_dim_;
    Rows q(t_count), k(t_count), v(t_count);
    for (int t = 0; t < t_count; ++t) {
      const auto h = rms(x[t], w(p + "input_layernorm.weight"));
      q[t] = linear(h, p + "self_attn.q_proj", qd);
      k[t] = linear(h, p + "self_attn.k_proj", kd);
      v[t] = linear(h, p + "self_attn.v_proj", kd);
      if (arch_ == "Qwen3MoeForCausalLM") {
        per_head_norm(q[t], heads_, w(p + "self_attn.q_norm.weight"));
        per_head_norm(k[t], kv_heads_, w(p + "self_attn.k_norm.weight"));
      }
      rope(q[t], heads_, t);
      rope(k[t], kv_heads_, t);
    }
    const Rows attn = attend(q, k, v);
    const int l = std::stoi(p.substr(std::string("model.layers.").size()));
    for (int t = 0; t < t_count; ++t) {
      const auto o = linear(attn[t], p + "self_attn.o_proj", hidden_);
      for (int i = 0; i < hidden_; ++i) x[t][i] += o[i];
      const auto h = rms(x[t], w(p + "post_attention_layernorm.weight"));
      const auto d = sparse_[static_cast<std::size_t>(l)] ? sparse(h, p) : mlp(h, p);
      for (int i = 0; i < hidden_; ++i) x[t][i] += d[i];
    }
  }

 private:
  std::vector<double> sparse(const std::vector<double>& h, const std::string& p) const {
    const std::string b = p + (mixtral_ ? "block_sparse_moe." : "mlp.");
    const auto logits = linear(h, b + "gate", experts_);
    double mx = logits[0];
    for (double z : logits) mx = std::max(mx, z);
    std::vector<double> prob(static_cast<std::size_t>(experts_));
    double total = 0;
    for (int e = 0; e < experts_; ++e) total += (prob[e] = std::exp(logits[e] - mx));
    for (double& v : prob) v /= total;
    // Ranks: larger probability first; equal ones by index (lowest first, or highest).
    std::vector<int> order(static_cast<std::size_t>(experts_));
    for (int e = 0; e < experts_; ++e) order[e] = e;
    const bool highest = ablation_ == Ablation::kTieHighestIndex;
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) {
      if (prob[a] != prob[c]) return prob[a] > prob[c];
      return highest ? a > c : a < c;
    });
    const int k = ablation_ == Ablation::kTop1 ? 1 : top_k_;
    hits_.resize(static_cast<std::size_t>(experts_));
    for (int r = 0; r < k; ++r) ++hits_[static_cast<std::size_t>(order[r])];
    std::vector<double> weight(static_cast<std::size_t>(k));
    double sum = 0;
    for (int r = 0; r < k; ++r) sum += (weight[r] = prob[order[r]]);
    if (norm_ && ablation_ != Ablation::kNoNormTopk) {
      for (double& v : weight) v /= sum;
    }
    if (ablation_ == Ablation::kReversedWeights) std::reverse(weight.begin(), weight.end());
    std::vector<double> out(static_cast<std::size_t>(hidden_), 0.0);
    for (int r = 0; r < k; ++r) {
      const auto y = expert(h, b + "experts." + std::to_string(order[r]) + ".");
      for (int i = 0; i < hidden_; ++i) out[i] += weight[r] * y[i];
    }
    if (qwen2_ && ablation_ != Ablation::kNoSharedExpert) {
      const double z = linear(h, b + "shared_expert_gate", 1)[0];
      const double s = ablation_ == Ablation::kUngatedShared ? 1.0 : 1.0 / (1.0 + std::exp(-z));
      const auto y = expert(h, b + "shared_expert.");
      for (int i = 0; i < hidden_; ++i) out[i] += s * y[i];
    }
    return out;
  }

  // down(silu(gate(h)) * up(h)) of one expert (prefix "...experts.E.").
  std::vector<double> expert(const std::vector<double>& h, const std::string& e) const {
    const int inter =
        static_cast<int>(w(e + (mixtral_ ? "w1" : "gate_proj") + ".weight").size()) / hidden_;
    auto g = linear(h, e + (mixtral_ ? "w1" : "gate_proj"), inter);
    const auto u = linear(h, e + (mixtral_ ? "w3" : "up_proj"), inter);
    for (int i = 0; i < inter; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return linear(g, e + (mixtral_ ? "w2" : "down_proj"), hidden_);
  }

  Ablation ablation_;
  bool mixtral_ = false, qwen2_ = false;
  int experts_ = 0, top_k_ = 0;
  bool norm_ = false;
  std::vector<bool> sparse_;
  mutable std::vector<int> hits_;
};

}  // namespace detinfer::testing
