// transformers' OLMo 2 decoder layer (modeling_olmo2: Olmo2DecoderLayer, Olmo2Attention)
// in float64, for the model tests: no norm on the sublayer inputs; q_norm / k_norm are
// RMSNorms over the whole q and k projections (num_heads * head_dim and
// num_kv_heads * head_dim wide), before RoPE; post_attention_layernorm and
// post_feedforward_layernorm normalize each sublayer's output before the residual add.
// Written from the Hugging Face module, independent of src/model.
#pragma once

#include <string>
#include <vector>

#include "model/reference_forward.h"

namespace detinfer::testing {

class ReferenceOlmo2 : public ReferenceModel {
 public:
  // What the "feature removed" models change (the test checks detinfer is far from them).
  enum class Ablation {
    kNone,
    kNoPostNorms,    // sublayer outputs added without post_attention/post_feedforward norms
    kPerHeadQkNorm,  // q/k normalized head by head (Qwen3's way), weights sliced per head
  };

  explicit ReferenceOlmo2(const std::string& dir, Ablation ablation = Ablation::kNone)
      : ReferenceModel(dir), ablation_(ablation) {}

 protected:
  void layer(const std::string& p, Rows& x) const override {
    const int t_count = static_cast<int>(x.size());
    const int qd = heads_ * head_dim_, kd = kv_heads_ * head_dim_;
    Rows q(t_count), k(t_count), v(t_count);
    for (int t = 0; t < t_count; ++t) {
      q[t] = qk_norm(linear(x[t], p + "self_attn.q_proj", qd), w(p + "self_attn.q_norm.weight"));
      k[t] = qk_norm(linear(x[t], p + "self_attn.k_proj", kd), w(p + "self_attn.k_norm.weight"));
      v[t] = linear(x[t], p + "self_attn.v_proj", kd);
      rope(q[t], heads_, t);
      rope(k[t], kv_heads_, t);
    }
    const Rows attn = attend(q, k, v);
    for (int t = 0; t < t_count; ++t) {
      const auto o = post_norm(linear(attn[t], p + "self_attn.o_proj", hidden_),
                               p + "post_attention_layernorm.weight");
      for (int i = 0; i < hidden_; ++i) x[t][i] += o[i];
      const auto d = post_norm(mlp(x[t], p), p + "post_feedforward_layernorm.weight");
      for (int i = 0; i < hidden_; ++i) x[t][i] += d[i];
    }
  }

 private:
  std::vector<double> qk_norm(const std::vector<double>& x, const std::vector<double>& g) const {
    if (ablation_ != Ablation::kPerHeadQkNorm) return rms(x, g);
    std::vector<double> out;
    for (std::size_t at = 0; at < x.size(); at += static_cast<std::size_t>(head_dim_)) {
      const std::vector<double> part(x.begin() + at, x.begin() + at + head_dim_);
      const std::vector<double> gp(g.begin() + at, g.begin() + at + head_dim_);
      const auto n = rms(part, gp);
      out.insert(out.end(), n.begin(), n.end());
    }
    return out;
  }

  std::vector<double> post_norm(const std::vector<double>& x, const std::string& name) const {
    return ablation_ == Ablation::kNoPostNorms ? x : rms(x, w(name));
  }

  Ablation ablation_;
};

}  // namespace detinfer::testing
