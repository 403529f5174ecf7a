// docs/numerics.md is enough to reproduce canonical logits: a binary32 forward pass
// written from that page alone (plain loops, no detinfer kernels or model code: its own
// chunked dot and sum, its own exp from the page's pseudo-code, the RoPE table from glibc
// as the page defines it) equals the canonical model's logits bit for bit, for every
// supported architecture (OLMo 2's post-norms and full-width q/k norm, Phi-3's fused
// projections and partial rotary included), weight dtype, tied and untied heads, llama3
// RoPE scaling, and prompts that span more than one 64-key attention chunk. Gemma 2 / 3
// (issue 29): the page's tanh, GeGLU, (1 + w) norms, embedding scale, soft-capping,
// sliding windows folded from the first visible key (a 66-key window over 70 tokens: two
// chunks), Gemma 3's local RoPE table and linear scaling on its global layers. Mixture of
// experts: Qwen3-MoE's, Mixtral's and Qwen2-MoE's sparse blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/model_test_util.h"
#include "model/tensor_store.h"

namespace detinfer {
namespace {

using Vec = std::vector<float>;

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// "Inputs": weights widened exactly (bf16: the top half of a binary32; f16: same value).
float widen(const std::uint8_t* p, core::DType dtype) {
  if (dtype == core::DType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  if (dtype == core::DType::kBF16) return from_bits(static_cast<std::uint32_t>(h) << 16);
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                         : std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) != 0 ? -v : v;
}

// "Reductions: the chunked order".
float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t c = 0; c < n; c += 64) {
    float p = 0.0f;
    for (std::int64_t i = c; i < std::min<std::int64_t>(n, c + 64); ++i)
      p = std::fma(a[i], b[i], p);
    s = s + p;
  }
  return s;
}

float sum(const float* x, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t c = 0; c < n; c += 64) {
    float p = 0.0f;
    for (std::int64_t i = c; i < std::min<std::int64_t>(n, c + 64); ++i) p = p + x[i];
    s = s + p;
  }
  return s;
}

// "exp_f32(x)", line by line.
float exp_f32(float x) {
  if (std::isnan(x)) return x + x;
  if (x > 89.0f) return INFINITY;
  if (x < -104.0f) return 0.0f;
  const float t = x * 0x1.715476p+0f;
  const float k = (t + 0x1.8p23f) - 0x1.8p23f;
  float r = std::fma(-k, 0x1.63p-1f, x);
  r = std::fma(-k, -0x1.bd0106p-13f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  float y = std::fma(p, r * r, r);
  y = y + 1.0f;
  const int ki = static_cast<int>(k);
  const int k1 = ki >> 1, k2 = ki - k1;
  auto pow2 = [](int e) { return from_bits(static_cast<std::uint32_t>(e + 127) << 23); };
  return (y * pow2(k1)) * pow2(k2);
}

// "tanh", line by line.
float tanh_f32(float x) {
  if (std::isnan(x)) return x + x;
  const float a = std::fabs(x);
  float t;
  if (a < 0.5f) {
    const float z = a * a;
    float p = 0x1.355824p-11f;
    for (const float c : {-0x1.7da364p-10f, 0x1.d6d3d0p-9f, -0x1.226e36p-7f, 0x1.664f48p-6f,
                          -0x1.ba1ba2p-5f, 0x1.111112p-3f, -0x1.555556p-2f})
      p = std::fma(p, z, c);
    t = std::fma(a * z, p, a);
  } else {
    const float e = exp_f32(-2.0f * a);
    t = (1.0f - e) / (1.0f + e);
  }
  return std::copysign(t, x);
}

float gelu_tanh(float x) {
  return (0.5f * x) * (1.0f + tanh_f32(0x1.988454p-1f * (x + 0.044715f * ((x * x) * x))));
}

// The page's composition for one model folder.
class SpecModel {
 public:
  explicit SpecModel(const std::string& dir) : store_(model::TensorStore::open(dir)) {
    std::ifstream in(dir + "/config.json");
    const nlohmann::json c = nlohmann::json::parse(in);
    arch_ = c["architectures"][0].get<std::string>();
    hidden_ = c["hidden_size"];
    layers_ = c["num_hidden_layers"];
    heads_ = c["num_attention_heads"];
    kv_heads_ = c["num_key_value_heads"];
    vocab_ = c["vocab_size"];
    head_dim_ = c.contains("head_dim") ? c["head_dim"].get<std::int64_t>() : hidden_ / heads_;
    eps_ = static_cast<float>(c["rms_norm_eps"].get<double>());
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
    tied_ = c.value("tie_word_embeddings", false);
    gemma_ = arch_ == "Gemma2ForCausalLM" || arch_ == "Gemma3ForCausalLM";
    if (gemma_) read_gemma(c);
    top_k_ = c.value("num_experts_per_tok", 0);
    norm_topk_ = arch_ == "MixtralForCausalLM" || c.value("norm_topk_prob", false);
    // "RoPE table": d = r = int(head_dim * partial_rotary_factor).
    rot_ = static_cast<std::int64_t>(static_cast<double>(head_dim_) *
                                     c.value("partial_rotary_factor", 1.0));
    const double theta = c["rope_theta"];
    const bool llama3 = c.contains("rope_scaling") && !c["rope_scaling"].is_null() && !gemma_;
    for (std::int64_t i = 0; i < rot_ / 2; ++i) {
      double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rot_));
      if (llama3) {
        const auto& r = c["rope_scaling"];
        const double factor = r["factor"], lo = r["low_freq_factor"], hi = r["high_freq_factor"];
        const double old = r["original_max_position_embeddings"].get<double>();
        const double pi = 3.14159265358979323846;
        const double wavelen = (2.0 * pi) / f;
        if (wavelen > old / lo) {
          f = f / factor;
        } else if (!(wavelen < old / hi)) {
          const double smooth = (old / wavelen - lo) / (hi - lo);
          f = ((1.0 - smooth) * f) / factor + smooth * f;
        }
      }
      inv_.push_back(f);
    }
    if (gemma3_) {  // "Gemma": local table without scaling; linear scaling on the global one
      const double local = c["rope_local_base_freq"];
      for (std::int64_t i = 0; i < rot_ / 2; ++i) {
        local_inv_.push_back(
            1.0 / std::pow(local, static_cast<double>(2 * i) / static_cast<double>(rot_)));
        if (!c["rope_scaling"].is_null())
          inv_[i] = inv_[i] / c["rope_scaling"]["factor"].get<double>();
      }
    }
  }

  // Logits of every position of `tokens` ([T][vocab]).
  Vec logits(const std::vector<std::int32_t>& tokens) {
    const auto t_count = static_cast<std::int64_t>(tokens.size());
    const std::int64_t kvd = kv_heads_ * head_dim_;
    std::vector<Vec> x(tokens.size());
    const Vec emb = w("model.embed_tokens.weight");
    for (std::int64_t t = 0; t < t_count; ++t) {
      x[t].assign(emb.begin() + tokens[t] * hidden_, emb.begin() + (tokens[t] + 1) * hidden_);
      if (gemma_) {
        for (float& v : x[t]) v = v * embed_scale_;
      }
    }
    for (std::int64_t l = 0; l < layers_; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      Vec keys(t_count * kvd), values(t_count * kvd);
      for (std::int64_t t = 0; t < t_count; ++t) {
        if (gemma_) {
          gemma_row(p, l, t, x[t], keys, values);
        } else {
          layer_row(p, t, x[t], keys, values);
        }
      }
    }
    Vec out;
    const std::string head = tied_ ? "model.embed_tokens" : "lm_head";
    for (std::int64_t t = 0; t < t_count; ++t) {
      const Vec h = gemma_ ? nrm(x[t], "model.norm.weight", hidden_)
                           : rms_norm(x[t], w("model.norm.weight"), hidden_);
      Vec y = linear(h, head);
      if (final_cap_ > 0.0f) {
        for (float& v : y) v = tanh_f32(v / final_cap_) * final_cap_;
      }
      out.insert(out.end(), y.begin(), y.end());
    }
    return out;
  }

 private:
  // One layer ("One token row at position pos") for row t; appends its K and V.
  void layer_row(const std::string& p, std::int64_t t, Vec& x, Vec& keys, Vec& values) {
    const std::int64_t qd = heads_ * head_dim_, kvd = kv_heads_ * head_dim_;
    const bool post = arch_ == "Olmo2ForCausalLM";  // norm_placement = post
    Vec h = post ? x : rms_norm(x, w(p + "input_layernorm.weight"), hidden_);
    Vec q, k, v;
    if (has(p + "self_attn.qkv_proj.weight")) {  // Phi-3: rows [q | k | v]
      const Vec qkv = linear(h, p + "self_attn.qkv_proj");
      q.assign(qkv.begin(), qkv.begin() + qd);
      k.assign(qkv.begin() + qd, qkv.begin() + qd + kvd);
      v.assign(qkv.begin() + qd + kvd, qkv.end());
    } else {
      q = linear(h, p + "self_attn.q_proj");
      k = linear(h, p + "self_attn.k_proj");
      v = linear(h, p + "self_attn.v_proj");
    }
    if (has(p + "self_attn.q_norm.weight")) {  // per head (Qwen3) or full width (OLMo 2)
      q = rms_norm(q, w(p + "self_attn.q_norm.weight"), post ? qd : head_dim_);
      k = rms_norm(k, w(p + "self_attn.k_norm.weight"), post ? kvd : head_dim_);
    }
    rope(q, t, inv_);
    rope(k, t, inv_);
    std::copy(k.begin(), k.end(), keys.begin() + t * kvd);
    std::copy(v.begin(), v.end(), values.begin() + t * kvd);
    Vec o = linear(attention(q, keys, values, t + 1), p + "self_attn.o_proj");
    if (post) o = rms_norm(o, w(p + "post_attention_layernorm.weight"), hidden_);
    for (std::int64_t i = 0; i < hidden_; ++i) x[i] = x[i] + o[i];
    h = post ? x : rms_norm(x, w(p + "post_attention_layernorm.weight"), hidden_);
    for (const char* router : {"mlp.gate.weight", "block_sparse_moe.gate.weight"}) {
      if (!has(p + router)) continue;
      const Vec d = sparse_mlp(h, p + router);  // "Mixture of experts"
      for (std::int64_t i = 0; i < hidden_; ++i) x[i] = x[i] + d[i];
      return;
    }
    Vec g, u;
    if (has(p + "mlp.gate_up_proj.weight")) {  // Phi-3: rows [gate | up]
      const Vec gu = linear(h, p + "mlp.gate_up_proj");
      g.assign(gu.begin(), gu.begin() + gu.size() / 2);
      u.assign(gu.begin() + gu.size() / 2, gu.end());
    } else {
      g = linear(h, p + "mlp.gate_proj");
      u = linear(h, p + "mlp.up_proj");
    }
    Vec a(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) a[i] = (g[i] / (1.0f + exp_f32(-g[i]))) * u[i];
    Vec d = linear(a, p + "mlp.down_proj");
    if (post) d = rms_norm(d, w(p + "post_feedforward_layernorm.weight"), hidden_);
    for (std::int64_t i = 0; i < hidden_; ++i) x[i] = x[i] + d[i];
  }

  // "Gemma 2 / Gemma 3 text": the config values the composition reads.
  void read_gemma(const nlohmann::json& c) {
    gemma3_ = arch_ == "Gemma3ForCausalLM";
    scale_ = static_cast<float>(1.0 / std::sqrt(c["query_pre_attn_scalar"].get<double>()));
    auto cap = [&](const char* k) { return c[k].is_null() ? 0.0f : c[k].get<float>(); };
    attn_cap_ = cap("attn_logit_softcapping");
    final_cap_ = cap("final_logit_softcapping");
    window_ = c["sliding_window"];
    pattern_ = gemma3_ ? c["sliding_window_pattern"].get<std::int64_t>() : 2;
    // s = float(sqrt(double(hidden))) rounded to the embedding table's dtype.
    embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(hidden_)));
    const core::DType dt = store_.get("model.embed_tokens.weight").info->dtype;
    if (dt != core::DType::kF32) embed_scale_ = round_normal(embed_scale_, dt);
  }

  // One Gemma layer for row t (the page's Gemma pseudo-code).
  void gemma_row(const std::string& p, std::int64_t l, std::int64_t t, Vec& x, Vec& keys,
                 Vec& values) {
    const std::int64_t kvd = kv_heads_ * head_dim_;
    const bool sliding = (l + 1) % pattern_ != 0;
    Vec h = nrm(x, p + "input_layernorm.weight", hidden_);
    Vec q = linear(h, p + "self_attn.q_proj"), k = linear(h, p + "self_attn.k_proj");
    const Vec v = linear(h, p + "self_attn.v_proj");
    if (gemma3_) {
      q = nrm(q, p + "self_attn.q_norm.weight", head_dim_);
      k = nrm(k, p + "self_attn.k_norm.weight", head_dim_);
    }
    const std::vector<double>& table = gemma3_ && sliding ? local_inv_ : inv_;
    rope(q, t, table);
    rope(k, t, table);
    std::copy(k.begin(), k.end(), keys.begin() + t * kvd);
    std::copy(v.begin(), v.end(), values.begin() + t * kvd);
    const std::int64_t first = sliding ? std::max<std::int64_t>(0, t + 1 - window_) : 0;
    const Vec o = nrm(linear(attention(q, keys, values, t + 1, first), p + "self_attn.o_proj"),
                      p + "post_attention_layernorm.weight", hidden_);
    for (std::int64_t i = 0; i < hidden_; ++i) x[i] = x[i] + o[i];
    h = nrm(x, p + "pre_feedforward_layernorm.weight", hidden_);
    const Vec g = linear(h, p + "mlp.gate_proj"), u = linear(h, p + "mlp.up_proj");
    Vec a(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) a[i] = gelu_tanh(g[i]) * u[i];
    const Vec d =
        nrm(linear(a, p + "mlp.down_proj"), p + "post_feedforward_layernorm.weight", hidden_);
    for (std::int64_t i = 0; i < hidden_; ++i) x[i] = x[i] + d[i];
  }

  // rms_norm with (1 + w) weights.
  Vec nrm(const Vec& x, const std::string& name, std::int64_t n) {
    Vec g = w(name);
    for (float& v : g) v = 1.0f + v;
    return rms_norm(x, g, n);
  }

  // A normal binary32 rounded to nearest-even bf16 (8 significant bits) or f16 (11).
  static float round_normal(float f, core::DType dt) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    const int drop = dt == core::DType::kBF16 ? 16 : 13;
    const std::uint32_t half = (1u << (drop - 1)) - 1;
    b = (b + half + ((b >> drop) & 1)) & ~((1u << drop) - 1);
    return from_bits(b);
  }

  // "Mixture of experts": router softmax, top-k (ties to the lowest index), optional
  // renormalization, outputs combined in ascending expert index.
  Vec sparse_mlp(const Vec& h, const std::string& router) {
    const Vec z = linear(h, router.substr(0, router.size() - 7));  // minus ".weight"
    const auto n = static_cast<std::int64_t>(z.size());
    float m = z[0];
    for (std::int64_t e = 1; e < n; ++e) m = z[e] > m ? z[e] : m;
    Vec p(n);
    for (std::int64_t e = 0; e < n; ++e) p[e] = exp_f32(z[e] - m);
    const float den = sum(p.data(), n);
    for (std::int64_t e = 0; e < n; ++e) p[e] = p[e] / den;
    std::vector<bool> chosen(n, false);
    for (std::int64_t r = 0; r < top_k_; ++r) {
      std::int64_t best = -1;
      for (std::int64_t e = 0; e < n; ++e)
        if (!chosen[e] && (best < 0 || p[e] > p[best])) best = e;
      chosen[best] = true;
    }
    float s = 0.0f;
    for (std::int64_t e = 0; e < n; ++e) s = chosen[e] ? s + p[e] : s;
    const bool mixtral = arch_ == "MixtralForCausalLM";
    const std::string base =
        router.substr(0, router.size() - 11) + "experts.";  // minus gate.weight
    Vec acc(hidden_, 0.0f);
    for (std::int64_t e = 0; e < n; ++e) {
      if (!chosen[e]) continue;
      const float wt = norm_topk_ ? p[e] / s : p[e];
      const std::string ex = base + std::to_string(e) + ".";
      const Vec g = linear(h, ex + (mixtral ? "w1" : "gate_proj"));
      const Vec u = linear(h, ex + (mixtral ? "w3" : "up_proj"));
      Vec a(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) a[i] = (g[i] / (1.0f + exp_f32(-g[i]))) * u[i];
      const Vec y = linear(a, ex + (mixtral ? "w2" : "down_proj"));
      for (std::int64_t i = 0; i < hidden_; ++i) acc[i] = acc[i] + wt * y[i];
    }
    const std::string shared = router.substr(0, router.size() - 11) + "shared_expert";
    if (has(shared + "_gate.weight")) {  // Qwen2-MoE: sigmoid-gated shared expert, added last
      const float z = linear(h, shared + "_gate")[0];
      const float sg = 1.0f / (1.0f + exp_f32(-z));
      const Vec g = linear(h, shared + ".gate_proj"), u = linear(h, shared + ".up_proj");
      Vec a(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) a[i] = (g[i] / (1.0f + exp_f32(-g[i]))) * u[i];
      const Vec y = linear(a, shared + ".down_proj");
      for (std::int64_t i = 0; i < hidden_; ++i) acc[i] = acc[i] + sg * y[i];
    }
    return acc;
  }

  bool has(const std::string& name) const { return store_.find(name) != nullptr; }
  Vec w(const std::string& name) {
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
    const model::TensorRef& r = store_.get(name);
    const std::int64_t n = r.info->numel();
    const std::int64_t es = r.info->dtype == core::DType::kF32 ? 4 : 2;
    Vec v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[i] = widen(r.data() + i * es, r.info->dtype);
    return cache_[name] = v;
  }

  // rms_norm over consecutive groups of n (one group = one row or one head).
  Vec rms_norm(const Vec& x, const Vec& g, std::int64_t n) const {
    Vec y(x.size());
    for (std::size_t b = 0; b < x.size(); b += n) {
      const float ss = dot(&x[b], &x[b], n);
      const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps_);
      for (std::int64_t i = 0; i < n; ++i) y[b + i] = (x[b + i] * r) * g[i];
    }
    return y;
  }

  Vec linear(const Vec& x, const std::string& name) {
    const Vec wt = w(name + ".weight");
    const auto k = static_cast<std::int64_t>(x.size());
    const auto n = static_cast<std::int64_t>(wt.size()) / k;
    const Vec bias = has(name + ".bias") ? w(name + ".bias") : Vec();
    Vec y(n);
    for (std::int64_t r = 0; r < n; ++r) {
      y[r] = dot(x.data(), wt.data() + r * k, k);
      if (!bias.empty()) y[r] = y[r] + bias[r];
    }
    return y;
  }

  // The first rot_ elements of each head rotate; the rest pass through.
  void rope(Vec& x, std::int64_t pos, const std::vector<double>& inv) const {
    const std::int64_t half = rot_ / 2;
    for (std::size_t b = 0; b < x.size(); b += head_dim_) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos) * inv[i];
        const auto c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
        const float a = x[b + i], bb = x[b + i + half];
        x[b + i] = a * c - bb * s;
        x[b + i + half] = bb * c + a * s;
      }
    }
  }

  // "Attention": one row with keys 0..t-1 (cache rows of kv_heads * head_dim); a window
  // keeps keys first..t-1, renumbered from 0; soft-capped scores (Gemma 2).
  Vec attention(const Vec& q, const Vec& all_keys, const Vec& all_values, std::int64_t t_all,
                std::int64_t first = 0) const {
    const std::int64_t group = heads_ / kv_heads_, kvd = kv_heads_ * head_dim_;
    const Vec keys(all_keys.begin() + first * kvd, all_keys.end());
    const Vec values(all_values.begin() + first * kvd, all_values.end());
    const std::int64_t t = t_all - first;
    Vec out(q.size());
    for (std::int64_t h = 0; h < heads_; ++h) {
      const std::int64_t off = (h / group) * head_dim_;
      Vec score(t), e(t);
      for (std::int64_t j = 0; j < t; ++j) {
        score[j] = dot(&q[h * head_dim_], &keys[j * kvd + off], head_dim_) * scale_;
        if (attn_cap_ > 0.0f) score[j] = tanh_f32(score[j] / attn_cap_) * attn_cap_;
      }
      float m = score[0];
      for (std::int64_t j = 1; j < t; ++j) m = score[j] > m ? score[j] : m;
      for (std::int64_t j = 0; j < t; ++j) e[j] = exp_f32(score[j] - m);
      const float den = sum(e.data(), t);
      for (std::int64_t c = 0; c < head_dim_; ++c) {
        float s = 0.0f;
        for (std::int64_t j0 = 0; j0 < t; j0 += 64) {
          float p = 0.0f;
          for (std::int64_t j = j0; j < std::min(t, j0 + 64); ++j)
            p = std::fma(e[j], values[j * kvd + off + c], p);
          s = s + p;
        }
        out[h * head_dim_ + c] = s / den;
      }
    }
    return out;
  }

  model::TensorStore store_;
  std::map<std::string, Vec> cache_;
  std::string arch_;
  std::int64_t hidden_ = 0, layers_ = 0, heads_ = 0, kv_heads_ = 0, vocab_ = 0, head_dim_ = 0;
  std::int64_t rot_ = 0;
  float eps_ = 0, scale_ = 0;
  bool tied_ = false;
  std::int64_t top_k_ = 0;
  bool norm_topk_ = false;
  std::vector<double> inv_;
  // Gemma.
  bool gemma_ = false, gemma3_ = false;
  float attn_cap_ = 0, final_cap_ = 0, embed_scale_ = 1;
  std::int64_t window_ = 0, pattern_ = 2;
  std::vector<double> local_inv_;
};

struct SpecCase {
  devtools::TinyArch arch;
  core::DType dtype;
  bool tied;
};

TEST(SpecForward, LogitsFromTheDocumentEqualTheCanonicalModelBitForBit) {
  for (const SpecCase& c : {SpecCase{devtools::TinyArch::kLlama, core::DType::kF32, false},
                            SpecCase{devtools::TinyArch::kLlama, core::DType::kBF16, true},
                            SpecCase{devtools::TinyArch::kMistral, core::DType::kF16, false},
                            SpecCase{devtools::TinyArch::kQwen2, core::DType::kBF16, true},
                            SpecCase{devtools::TinyArch::kQwen2, core::DType::kF32, false},
                            SpecCase{devtools::TinyArch::kQwen3, core::DType::kBF16, false},
                            SpecCase{devtools::TinyArch::kOlmo2, core::DType::kBF16, false},
                            SpecCase{devtools::TinyArch::kPhi3, core::DType::kF16, true},
                            SpecCase{devtools::TinyArch::kGemma2, core::DType::kBF16, true},
                            SpecCase{devtools::TinyArch::kGemma3, core::DType::kF16, true},
                            SpecCase{devtools::TinyArch::kGemma3, core::DType::kF32, true},
                            SpecCase{devtools::TinyArch::kQwen3Moe, core::DType::kBF16, false},
                            SpecCase{devtools::TinyArch::kMixtral, core::DType::kF16, true},
                            SpecCase{devtools::TinyArch::kQwen2Moe, core::DType::kBF16, true}}) {
    const std::string dir = testing::scratch_dir("spec");
    devtools::TinyModelOptions o = testing::tiny_options(c.arch, c.dtype, dir, 21);
    o.tie_word_embeddings = c.tied;
    o.vocab = 200;  // no tokenizer needed
    // Gemma: a window of 66 over 70 tokens (two 64-key chunks from the first visible key),
    // Gemma 2 with small soft-caps, Gemma 3 with linear scaling on its global layers.
    if (c.arch == devtools::TinyArch::kGemma2 || c.arch == devtools::TinyArch::kGemma3) {
      o.hidden = 48;  // sqrt(48) rounds differently in bf16 / f16 / f32
      o.head_dim = 16;
    }
    if (c.arch == devtools::TinyArch::kGemma2) {
      o.sliding_window = 66;
      o.attn_logit_softcapping = 3.0;
      o.final_logit_softcapping = 4.0;
    }
    if (c.arch == devtools::TinyArch::kGemma3) {
      o.layers = 3;
      o.sliding_window_pattern = 2;
      o.sliding_window = c.dtype == core::DType::kF32 ? 9 : 66;
      o.linear_rope_factor = 2.0;
      o.rope_local_base_freq = 50.0;
    }
    if (c.arch == devtools::TinyArch::kQwen3Moe || c.arch == devtools::TinyArch::kQwen2Moe)
      o.mlp_only_layers = {1};  // a dense layer too
    devtools::make_tiny_model(o);
    const std::vector<std::int32_t> tokens = testing::test_tokens(70, o.vocab, 4);
    const Vec want = SpecModel(dir).logits(tokens);

    const auto model = model::Model::load(dir, model::ModelOptions{});
    model::KvCachePool kv(model->config(), 16, std::int64_t{8} << 20);
    model::SequenceStep step;
    step.tokens = tokens;
    for (std::int64_t b = 0; b < 5; ++b) step.block_table.push_back(kv.allocate());
    step.all_logits = true;
    Vec got;
    model->forward({step}, kv, got);
    ASSERT_EQ(got.size(), want.size());
    std::int64_t diffs = 0, first = -1;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], 4) != 0 && diffs++ == 0)
        first = static_cast<std::int64_t>(i);
    }
    EXPECT_EQ(diffs, 0) << "arch " << static_cast<int>(c.arch) << " dtype "
                        << static_cast<int>(c.dtype) << " tied " << c.tied << ": first at row "
                        << first / o.vocab << " column " << first % o.vocab << " got "
                        << (first >= 0 ? got[first] : 0.f) << " want "
                        << (first >= 0 ? want[first] : 0.f);
  }
}

}  // namespace
}  // namespace detinfer
