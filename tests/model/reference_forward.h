// An independent float64 forward pass for the model tests: plain loops over the weights
// as stored in the safetensors file(s), no detinfer kernels. Reads config.json itself.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/reference_rope.h"
#include "model/tensor_store.h"

namespace detinfer::testing {

inline double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

inline double bf16_to_double(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

class ReferenceModel {
 public:
  // `ignore_rope_scaling`: the model without its rope_scaling (tests that scaling matters);
  // `ignore_partial_rotary`: every head dimension rotates (tests that partial rotary does).
  explicit ReferenceModel(const std::string& dir, bool ignore_rope_scaling = false,
                          bool ignore_partial_rotary = false) {
    std::ifstream in(dir + "/config.json");
    const nlohmann::json c = nlohmann::json::parse(in);
    arch_ = c["architectures"][0].get<std::string>();
    hidden_ = c["hidden_size"];
    inter_ = c["intermediate_size"];
    layers_ = c["num_hidden_layers"];
    heads_ = c["num_attention_heads"];
    kv_heads_ = c["num_key_value_heads"];
    vocab_ = c["vocab_size"];
    head_dim_ = c.contains("head_dim") ? c["head_dim"].get<int>() : hidden_ / heads_;
    eps_ = c["rms_norm_eps"];
    theta_ = c["rope_theta"];
    tied_ = c.value("tie_word_embeddings", false);
    // transformers: dim = int(head_dim * partial_rotary_factor) (Phi-3).
    const double partial = ignore_partial_rotary ? 1.0 : c.value("partial_rotary_factor", 1.0);
    rotary_dim_ = static_cast<int>(head_dim_ * partial);
    rope_ = ReferenceRope(c, rotary_dim_, ignore_rope_scaling);
    // transformers' sliding windows: Mistral / Phi-3 every layer; Qwen2 / Qwen3 layers >=
    // max_window_layers when use_sliding_window (issue 29).
    if (c.contains("sliding_window") && c["sliding_window"].is_number()) {
      const bool qwen = arch_ == "Qwen2ForCausalLM" || arch_ == "Qwen3ForCausalLM";
      if (!qwen || c.value("use_sliding_window", false)) {
        window_ = c["sliding_window"];
        first_window_layer_ = qwen ? c.value("max_window_layers", 28) : 0;
      }
    }
    const model::TensorStore store = model::TensorStore::open(dir);
    for (const auto& [name, ref] : store.tensors()) {
      const std::int64_t n = ref.info->numel();
      std::vector<double> v(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        if (ref.info->dtype == core::DType::kF32) {
          float f;
          std::memcpy(&f, ref.data() + 4 * i, 4);
          v[static_cast<std::size_t>(i)] = f;
        } else {
          std::uint16_t b;
          std::memcpy(&b, ref.data() + 2 * i, 2);
          v[static_cast<std::size_t>(i)] =
              ref.info->dtype == core::DType::kBF16 ? bf16_to_double(b) : half_to_double(b);
        }
      }
      w_[name] = std::move(v);
    }
  }

  int vocab() const { return vocab_; }

  virtual ~ReferenceModel() = default;

  // [T][vocab] logits for the prompt `tokens` at positions 0..T-1.
  std::vector<std::vector<double>> logits(const std::vector<std::int32_t>& tokens) const {
    const int t_count = static_cast<int>(tokens.size());
    std::vector<std::vector<double>> x(t_count);
    const auto& emb = w("model.embed_tokens.weight");
    for (int t = 0; t < t_count; ++t) {
      x[t].assign(emb.begin() + tokens[t] * hidden_, emb.begin() + (tokens[t] + 1) * hidden_);
    }
    for (int l = 0; l < layers_; ++l) layer("model.layers." + std::to_string(l) + ".", x);
    std::vector<std::vector<double>> out(t_count);
    const auto& head = w(tied_ ? "model.embed_tokens.weight" : "lm_head.weight");
    for (int t = 0; t < t_count; ++t) {
      const auto h = rms(x[t], w("model.norm.weight"));
      out[t].assign(vocab_, 0.0);
      for (int r = 0; r < vocab_; ++r) {
        double s = 0;
        for (int i = 0; i < hidden_; ++i) s += head[r * hidden_ + i] * h[i];
        out[t][r] = s;
      }
    }
    return out;
  }

 protected:
  using Rows = std::vector<std::vector<double>>;

  // One decoder layer (prefix "model.layers.N.") over every row: the Llama family's
  // pre-norm layer, with Qwen2's biases and Qwen3's per-head q/k norm.
  virtual void layer(const std::string& p, Rows& x) const {
    const int t_count = static_cast<int>(x.size());
    const int qd = heads_ * head_dim_, kd = kv_heads_ * head_dim_;
    Rows q(t_count), k(t_count), v(t_count);
    for (int t = 0; t < t_count; ++t) {
      const auto h = rms(x[t], w(p + "input_layernorm.weight"));
      q[t] = linear(h, p + "self_attn.q_proj", qd);
      k[t] = linear(h, p + "self_attn.k_proj", kd);
      v[t] = linear(h, p + "self_attn.v_proj", kd);
      if (arch_ == "Qwen3ForCausalLM") {
        per_head_norm(q[t], heads_, w(p + "self_attn.q_norm.weight"));
        per_head_norm(k[t], kv_heads_, w(p + "self_attn.k_norm.weight"));
      }
      rope(q[t], heads_, t);
      rope(k[t], kv_heads_, t);
    }
    const int li = std::stoi(p.substr(std::string("model.layers.").size()));
    const Rows attn = attend(q, k, v, li >= first_window_layer_ ? window_ : 0);
    for (int t = 0; t < t_count; ++t) {
      const auto o = linear(attn[t], p + "self_attn.o_proj", hidden_);
      for (int i = 0; i < hidden_; ++i) x[t][i] += o[i];
      const auto d = mlp(rms(x[t], w(p + "post_attention_layernorm.weight")), p);
      for (int i = 0; i < hidden_; ++i) x[t][i] += d[i];
    }
  }

  // Causal softmax attention of every row (q, k after RoPE), heads concatenated; window >
  // 0: row t sees keys j with t - window < j <= t (masking_utils' sliding_window_overlay).
  Rows attend(const Rows& q, const Rows& k, const Rows& v, int window = 0) const {
    const int t_count = static_cast<int>(q.size());
    const int group = heads_ / kv_heads_;
    Rows out(t_count);
    for (int t = 0; t < t_count; ++t) {
      std::vector<double> attn(heads_ * head_dim_, 0.0);
      for (int hh = 0; hh < heads_; ++hh) {
        const int kvh = hh / group;
        std::vector<double> s(t + 1);
        double mx = -1e300;
        const int j0 = window > 0 ? std::max(0, t - window + 1) : 0;
        for (int j = j0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < head_dim_; ++i) {
            d += q[t][hh * head_dim_ + i] * k[j][kvh * head_dim_ + i];
          }
          s[j] = d / std::sqrt(static_cast<double>(head_dim_));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = j0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int j = j0; j <= t; ++j) {
          for (int i = 0; i < head_dim_; ++i) {
            attn[hh * head_dim_ + i] += s[j] / sum * v[j][kvh * head_dim_ + i];
          }
        }
      }
      out[t] = std::move(attn);
    }
    return out;
  }

  // down(silu(gate(h)) * up(h)).
  std::vector<double> mlp(const std::vector<double>& h, const std::string& p) const {
    auto g = linear(h, p + "mlp.gate_proj", inter_);
    const auto u = linear(h, p + "mlp.up_proj", inter_);
    for (int i = 0; i < inter_; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return linear(g, p + "mlp.down_proj", hidden_);
  }

  const std::vector<double>& w(const std::string& name) const { return w_.at(name); }

  std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& g) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + eps_);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
    return y;
  }

  void per_head_norm(std::vector<double>& x, int heads, const std::vector<double>& g) const {
    for (int h = 0; h < heads; ++h) {
      std::vector<double> part(x.begin() + h * head_dim_, x.begin() + (h + 1) * head_dim_);
      part = rms(part, g);
      std::copy(part.begin(), part.end(), x.begin() + h * head_dim_);
    }
  }

  std::vector<double> linear(const std::vector<double>& x, const std::string& name, int n) const {
    const auto& wt = w(name + ".weight");
    const int k = static_cast<int>(x.size());
    std::vector<double> y(n, 0.0);
    const auto b = w_.find(name + ".bias");
    for (int r = 0; r < n; ++r) {
      double s = b != w_.end() ? b->second[r] : 0.0;
      for (int i = 0; i < k; ++i) s += wt[r * k + i] * x[i];
      y[r] = s;
    }
    return y;
  }

  // rotate_half on the first rotary_dim_ dimensions of each head; the rest pass through.
  void rope(std::vector<double>& x, int heads, int pos) const {
    const int half = rotary_dim_ / 2;
    for (int h = 0; h < heads; ++h) {
      double* v = x.data() + h * head_dim_;
      for (int i = 0; i < half; ++i) {
        const double c = rope_.cos(pos, i), s = rope_.sin(pos, i);
        const double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
  }

  std::string arch_;
  int hidden_ = 0, inter_ = 0, layers_ = 0, heads_ = 0, kv_heads_ = 0, vocab_ = 0, head_dim_ = 0;
  int rotary_dim_ = 0;
  double eps_ = 0, theta_ = 0;
  bool tied_ = false;
  int window_ = 0, first_window_layer_ = 0;  // sliding window (0: none) from this layer on
  ReferenceRope rope_{nlohmann::json{{"rope_theta", 10000.0}}, 2};
  std::map<std::string, std::vector<double>> w_;
};

}  // namespace detinfer::testing
