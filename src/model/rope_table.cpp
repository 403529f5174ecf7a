#include "model/rope_table.h"

#include <algorithm>
#include <cmath>

#include "model/rope_math.h"

namespace detinfer::model {
namespace {

constexpr double kPi = 3.14159265358979323846;  // the double nearest pi

// transformers' _compute_llama3_parameters for one frequency, in double.
double llama3(const RopeScaling& s, double f) {
  const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_ctx / s.low_freq_factor;
  const double high_wavelen = old_ctx / s.high_freq_factor;
  const double wavelen = 2.0 * kPi / f;
  if (wavelen > low_wavelen) return f / s.factor;
  if (wavelen < high_wavelen) return f;
  const double smooth =
      (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

// yarn's mscale: 1 when scale <= 1, else 0.1 * m * ln(scale) + 1.
double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * rope_math::log(scale) + 1.0;
}

// The dimension (of d) at which a frequency turns `rotations` times over the original
// context: d * ln(old / (rotations * 2 * pi)) / (2 * ln(theta)).
double yarn_dim(double rotations, double d, double theta, double old_ctx) {
  return (d * rope_math::log(old_ctx / (rotations * 2.0 * kPi))) / (2.0 * rope_math::log(theta));
}

// transformers' _compute_yarn_parameters, in double: the blend of interpolated (divided by
// factor) and extrapolated (unchanged) frequencies along a linear ramp over dimensions.
// `base[i]` is theta^(2i/d); inv[i] becomes the blend.
void yarn(const RopeScaling& s, double theta, std::int64_t d, const std::vector<double>& base,
          std::vector<double>& inv) {
  const double dd = static_cast<double>(d);
  const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
  double low = yarn_dim(s.beta_fast, dd, theta, old_ctx);
  double high = yarn_dim(s.beta_slow, dd, theta, old_ctx);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dd - 1.0);
  if (low == high) high += 0.001;
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    const double interpolation = 1.0 / (s.factor * base[i]);
    inv[i] = interpolation * (1.0 - extrapolation) + (1.0 / base[i]) * extrapolation;
  }
}

double scaling_attention_factor(const RopeScaling& s) {
  if (s.attention_factor != 0.0) return s.attention_factor;
  if (s.type == "yarn") {
    if (s.mscale != 0.0 && s.mscale_all_dim != 0.0)
      return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
    return yarn_mscale(s.factor, 1.0);
  }
  if (s.type == "longrope" && s.factor > 1.0) {
    const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
    return std::sqrt(1.0 + rope_math::log(s.factor) / rope_math::log(old_ctx));
  }
  return 1.0;
}

}  // namespace

RopeTable::RopeTable(const ModelConfig& c) : half_(rope_dims(c) / 2) {
  const std::int64_t d = rope_dims(c);  // head_dim, or the partial rotary dimensions
  const RopeScaling& s = c.rope_scaling;
  inv_freq_.resize(static_cast<std::size_t>(half_));
  std::vector<double> base(static_cast<std::size_t>(half_));
  for (std::int64_t i = 0; i < half_; ++i) {
    const auto at = static_cast<std::size_t>(i);
    const double exponent = static_cast<double>(2 * i) / static_cast<double>(d);
    base[at] = rope_math::pow(c.rope_theta, exponent);
    double f = 1.0 / base[at];
    if (s.type == "llama3") f = llama3(s, f);
    if (s.type == "linear") f = f / s.factor;
    if (s.type == "longrope") f = 1.0 / (s.short_factor[at] * base[at]);
    inv_freq_[at] = f;
  }
  if (s.type == "yarn") yarn(s, c.rope_theta, d, base, inv_freq_);
  attention_factor_ = scaling_attention_factor(s);
}

void RopeTable::ensure(std::int64_t n) {
  if (n <= size_) return;
  cos_.resize(static_cast<std::size_t>(n * half_));
  sin_.resize(static_cast<std::size_t>(n * half_));
  for (std::int64_t p = size_; p < n; ++p) {
    for (std::int64_t i = 0; i < half_; ++i) {
      const double angle = static_cast<double>(p) * inv_freq_[static_cast<std::size_t>(i)];
      const auto at = static_cast<std::size_t>(p * half_ + i);
      if (attention_factor_ == 1.0) {
        rope_math::sincos_f(angle, &sin_[at], &cos_[at]);
      } else {
        double sn = 0, cs = 0;
        rope_math::sincos(angle, &sn, &cs);
        sin_[at] = static_cast<float>(sn * attention_factor_);
        cos_[at] = static_cast<float>(cs * attention_factor_);
      }
    }
  }
  size_ = n;
}

}  // namespace detinfer::model
