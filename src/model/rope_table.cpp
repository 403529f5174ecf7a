#include "model/rope_table.h"

#include "model/rope_math.h"

namespace detinfer::model {

RopeTable::RopeTable(const ModelConfig& c) : half_(c.head_dim / 2) {
  const double pi = 3.14159265358979323846;
  inv_freq_.resize(static_cast<std::size_t>(half_));
  for (std::int64_t i = 0; i < half_; ++i) {
    const double exponent = static_cast<double>(2 * i) / static_cast<double>(c.head_dim);
    double f = 1.0 / rope_math::pow(c.rope_theta, exponent);
    if (c.rope_scaling.type == "llama3") {
      // transformers' _compute_llama3_parameters, in double.
      const RopeScaling& s = c.rope_scaling;
      const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
      const double low_wavelen = old_ctx / s.low_freq_factor;
      const double high_wavelen = old_ctx / s.high_freq_factor;
      const double wavelen = 2.0 * pi / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth =
            (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv_freq_[static_cast<std::size_t>(i)] = f;
  }
}

void RopeTable::ensure(std::int64_t n) {
  if (n <= size_) return;
  cos_.resize(static_cast<std::size_t>(n * half_));
  sin_.resize(static_cast<std::size_t>(n * half_));
  for (std::int64_t p = size_; p < n; ++p) {
    for (std::int64_t i = 0; i < half_; ++i) {
      const double angle = static_cast<double>(p) * inv_freq_[static_cast<std::size_t>(i)];
      const auto at = static_cast<std::size_t>(p * half_ + i);
      rope_math::sincos_f(angle, &sin_[at], &cos_[at]);
    }
  }
  size_ = n;
}

}  // namespace detinfer::model
