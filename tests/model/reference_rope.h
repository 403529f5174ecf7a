// transformers' RoPE (modeling_rope_utils: default, linear, dynamic, llama3, yarn, longrope)
// in float64 with the C library, for the float64 reference forward pass. Written from the
// Hugging Face algorithms, independent of src/model/rope_*.
#pragma once

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace detinfer::testing {

class ReferenceRope {
 public:
  // `c` is config.json; `ignore_scaling` drops rope_scaling (the "feature removed" model).
  ReferenceRope(const nlohmann::json& c, int head_dim, bool ignore_scaling = false) {
    const double theta = c["rope_theta"];
    const int half = head_dim / 2;
    inv_.resize(half);
    std::vector<double> base(half);
    for (int i = 0; i < half; ++i) {
      base[i] = std::pow(theta, 2.0 * i / head_dim);
      inv_[i] = 1.0 / base[i];
    }
    if (ignore_scaling || !c.contains("rope_scaling") || c["rope_scaling"].is_null()) return;
    const nlohmann::json& r = c["rope_scaling"];
    const std::string type = r.value("rope_type", r.value("type", std::string("default")));
    const double max_pos = c["max_position_embeddings"];
    const double old_ctx = r.value("original_max_position_embeddings",
                                   c.value("original_max_position_embeddings", max_pos));
    const double factor = r.value("factor", max_pos / old_ctx);
    if (type == "linear") {
      for (double& f : inv_) f /= factor;
    } else if (type == "llama3") {
      llama3(r, factor);
    } else if (type == "yarn") {
      yarn(r, theta, head_dim, base, factor, old_ctx);
    } else if (type == "longrope") {
      const std::vector<double> s = r["short_factor"];
      for (int i = 0; i < half; ++i) inv_[i] = 1.0 / (s[i] * base[i]);
      scale_ = r.value("attention_factor",
                       factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(old_ctx)));
    }
    // "dynamic": the frequencies transformers computes at init (sequence length within
    // max_position_embeddings) are the default ones.
  }

  double inv_freq(int i) const { return inv_[i]; }
  // cos and sin of position `pos`, dimension i, times the attention factor.
  double cos(int pos, int i) const { return std::cos(pos * inv_[i]) * scale_; }
  double sin(int pos, int i) const { return std::sin(pos * inv_[i]) * scale_; }

 private:
  void llama3(const nlohmann::json& r, double factor) {
    const double pi = 3.14159265358979323846;
    const double low = r["low_freq_factor"], high = r["high_freq_factor"];
    const double old_ctx = r["original_max_position_embeddings"];
    for (double& f : inv_) {
      const double wavelen = 2 * pi / f;
      if (wavelen > old_ctx / low) {
        f = f / factor;
      } else if (!(wavelen < old_ctx / high)) {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  }

  static double mscale(double scale, double m) {
    return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
  }

  void yarn(const nlohmann::json& r, double theta, int dim, const std::vector<double>& base,
            double factor, double old_ctx) {
    const double pi = 3.14159265358979323846;
    const double beta_fast = r.value("beta_fast", 32.0), beta_slow = r.value("beta_slow", 1.0);
    auto correction_dim = [&](double rotations) {
      return (dim * std::log(old_ctx / (rotations * 2 * pi))) / (2 * std::log(theta));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (r.value("truncate", true)) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;
    for (std::size_t i = 0; i < inv_.size(); ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation_factor = 1 - ramp;
      inv_[i] = 1.0 / (factor * base[i]) * (1 - extrapolation_factor) +
                1.0 / base[i] * extrapolation_factor;
    }
    const double m = r.value("mscale", 0.0), m_all = r.value("mscale_all_dim", 0.0);
    scale_ = r.value("attention_factor", m != 0.0 && m_all != 0.0
                                             ? mscale(factor, m) / mscale(factor, m_all)
                                             : mscale(factor, 1.0));
  }

  std::vector<double> inv_;
  double scale_ = 1.0;
};

}  // namespace detinfer::testing
