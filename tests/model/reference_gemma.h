// transformers' Gemma 2 and Gemma 3 text decoders (modeling_gemma2 / modeling_gemma3) in
// float64, for the model tests, written from the Hugging Face modules and independent of
// src/model: embeddings times sqrt(hidden_size); RMSNorm with (1 + weight); pre- and
// post-norms around attention and the MLP; GeGLU with gelu_pytorch_tanh; attention scale
// query_pre_attn_scalar^-0.5; attention-logit soft-capping tanh(s / c) * c before the mask;
// sliding layers (Gemma 2: even layers; Gemma 3: (i + 1) % sliding_window_pattern != 0)
// see keys j with t - window < j <= t (masking_utils' sliding_window_overlay); Gemma 3:
// per-head q/k norm and the local RoPE base (no scaling) on sliding layers, rope_theta
// with rope_scaling on the others; final norm, tied lm_head, final soft-capping.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/reference_forward.h"

namespace detinfer::testing {

class ReferenceGemma : public ReferenceModel {
 public:
  // A distinctive feature removed (the test checks detinfer is far from each).
  enum class Ablation {
    kNone,
    kNoAttnSoftcap,    // attention scores not soft-capped
    kNoFinalSoftcap,   // logits not soft-capped
    kNoPostNorms,      // post_attention / post_feedforward norms dropped
    kPlainNormWeight,  // RMSNorm times w instead of (1 + w)
    kNoWindow,         // sliding layers attend to every earlier key
    kNoEmbedScale,     // embeddings not multiplied by sqrt(hidden_size)
    kNoLocalRope,      // Gemma 3: sliding layers use the global RoPE table too
  };

  explicit ReferenceGemma(const std::string& dir, Ablation ablation = Ablation::kNone)
      : ReferenceModel(dir), ablation_(ablation) {
    std::ifstream in(dir + "/config.json");
    const nlohmann::json c = nlohmann::json::parse(in);
    gemma3_ = arch_ == "Gemma3ForCausalLM";
    auto num = [&](const char* k) { return c[k].is_null() ? 0.0 : c[k].get<double>(); };
    attn_cap_ = num("attn_logit_softcapping");
    final_cap_ = num("final_logit_softcapping");
    scale_ = 1.0 / std::sqrt(c["query_pre_attn_scalar"].get<double>());
    window_ = c["sliding_window"];
    pattern_ = gemma3_ ? c["sliding_window_pattern"].get<int>() : 2;
    nlohmann::json local = c;
    if (gemma3_) {
      local["rope_theta"] = c["rope_local_base_freq"];
      local["rope_scaling"] = nullptr;
    }
    local_rope_ = ReferenceRope(local, rotary_dim_);
  }

  std::vector<std::vector<double>> logits(const std::vector<std::int32_t>& tokens) const {
    const int t_count = static_cast<int>(tokens.size());
    Rows x(t_count);
    const auto& emb = w("model.embed_tokens.weight");
    const double norm = ablation_ == Ablation::kNoEmbedScale ? 1.0 : std::sqrt(1.0 * hidden_);
    for (int t = 0; t < t_count; ++t) {
      x[t].assign(emb.begin() + tokens[t] * hidden_, emb.begin() + (tokens[t] + 1) * hidden_);
      for (double& v : x[t]) v *= norm;
    }
    for (int l = 0; l < layers_; ++l) gemma_layer(l, x);
    Rows out(t_count);
    for (int t = 0; t < t_count; ++t) {
      const auto h = norm1p(x[t], "model.norm.weight");
      out[t].assign(vocab_, 0.0);
      for (int r = 0; r < vocab_; ++r) {
        double s = 0;
        for (int i = 0; i < hidden_; ++i) s += emb[r * hidden_ + i] * h[i];
        out[t][r] = final_cap_ > 0 && ablation_ != Ablation::kNoFinalSoftcap
                        ? std::tanh(s / final_cap_) * final_cap_
                        : s;
      }
    }
    return out;
  }

 private:
  bool sliding(int l) const { return (l + 1) % pattern_ != 0; }

  std::vector<double> norm1p(const std::vector<double>& x, const std::string& name) const {
    std::vector<double> g = w(name);
    if (ablation_ != Ablation::kPlainNormWeight) {
      for (double& v : g) v += 1.0;
    }
    return rms(x, g);
  }

  void gemma_layer(int l, Rows& x) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int t_count = static_cast<int>(x.size());
    const int qd = heads_ * head_dim_, kd = kv_heads_ * head_dim_;
    const bool local = sliding(l);
    const ReferenceRope& table =
        local && gemma3_ && ablation_ != Ablation::kNoLocalRope ? local_rope_ : rope_;
    Rows q(t_count), k(t_count), v(t_count);
    for (int t = 0; t < t_count; ++t) {
      const auto h = norm1p(x[t], p + "input_layernorm.weight");
      q[t] = linear(h, p + "self_attn.q_proj", qd);
      k[t] = linear(h, p + "self_attn.k_proj", kd);
      v[t] = linear(h, p + "self_attn.v_proj", kd);
      if (gemma3_) {
        head_norm(q[t], heads_, p + "self_attn.q_norm.weight");
        head_norm(k[t], kv_heads_, p + "self_attn.k_norm.weight");
      }
      rotate(q[t], heads_, t, table);
      rotate(k[t], kv_heads_, t, table);
    }
    const int window = local && ablation_ != Ablation::kNoWindow ? window_ : 0;
    const Rows attn = attend_capped(q, k, v, window);
    for (int t = 0; t < t_count; ++t) {
      auto o = linear(attn[t], p + "self_attn.o_proj", hidden_);
      if (ablation_ != Ablation::kNoPostNorms) o = norm1p(o, p + "post_attention_layernorm.weight");
      for (int i = 0; i < hidden_; ++i) x[t][i] += o[i];
      auto d = geglu(norm1p(x[t], p + "pre_feedforward_layernorm.weight"), p);
      if (ablation_ != Ablation::kNoPostNorms) {
        d = norm1p(d, p + "post_feedforward_layernorm.weight");
      }
      for (int i = 0; i < hidden_; ++i) x[t][i] += d[i];
    }
  }

  void head_norm(std::vector<double>& x, int heads, const std::string& name) const {
    for (int h = 0; h < heads; ++h) {
      std::vector<double> part(x.begin() + h * head_dim_, x.begin() + (h + 1) * head_dim_);
      part = norm1p(part, name);
      std::copy(part.begin(), part.end(), x.begin() + h * head_dim_);
    }
  }

  void rotate(std::vector<double>& x, int heads, int pos, const ReferenceRope& r) const {
    const int half = rotary_dim_ / 2;
    for (int h = 0; h < heads; ++h) {
      double* v = x.data() + h * head_dim_;
      for (int i = 0; i < half; ++i) {
        const double c = r.cos(pos, i), s = r.sin(pos, i);
        const double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
  }

  // Softmax attention with Gemma's scale and soft-capping; window > 0: keys j > t - window.
  Rows attend_capped(const Rows& q, const Rows& k, const Rows& v, int window) const {
    const int t_count = static_cast<int>(q.size()), group = heads_ / kv_heads_;
    const double cap = ablation_ == Ablation::kNoAttnSoftcap ? 0.0 : attn_cap_;
    Rows out(t_count);
    for (int t = 0; t < t_count; ++t) {
      out[t].assign(heads_ * head_dim_, 0.0);
      const int j0 = window > 0 ? std::max(0, t - window + 1) : 0;
      for (int hh = 0; hh < heads_; ++hh) {
        const int kvh = hh / group;
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int j = j0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < head_dim_; ++i)
            d += q[t][hh * head_dim_ + i] * k[j][kvh * head_dim_ + i];
          d *= scale_;
          s[j] = cap > 0 ? std::tanh(d / cap) * cap : d;
          mx = std::max(mx, s[j]);
        }
        for (int j = j0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int j = j0; j <= t; ++j) {
          for (int i = 0; i < head_dim_; ++i)
            out[t][hh * head_dim_ + i] += s[j] / sum * v[j][kvh * head_dim_ + i];
        }
      }
    }
    return out;
  }

  // down(gelu_tanh(gate(h)) * up(h)).
  std::vector<double> geglu(const std::vector<double>& h, const std::string& p) const {
    auto g = linear(h, p + "mlp.gate_proj", inter_);
    const auto u = linear(h, p + "mlp.up_proj", inter_);
    const double beta = std::sqrt(2.0 / M_PI);
    for (int i = 0; i < inter_; ++i) {
      const double x = g[i];
      g[i] = 0.5 * x * (1.0 + std::tanh(beta * (x + 0.044715 * x * x * x))) * u[i];
    }
    return linear(g, p + "mlp.down_proj", hidden_);
  }

  Ablation ablation_;
  bool gemma3_ = false;
  double attn_cap_ = 0, final_cap_ = 0, scale_ = 1;
  int window_ = 0, pattern_ = 2;
  ReferenceRope local_rope_{nlohmann::json{{"rope_theta", 10000.0}}, 2};
};

}  // namespace detinfer::testing
