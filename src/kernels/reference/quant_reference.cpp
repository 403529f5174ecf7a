// Quantized spec v1 as plain scalar C++ (reference/quant_reference.h, docs/numerics.md).
#include "kernels/reference/quant_reference.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_blocks.h"

namespace detinfer::kernels::ref {

std::uint16_t quantize_q8_block(const float* x, std::int8_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (std::int64_t i = 0; i < kQuantBlock; ++i) {
    finite = finite && std::isfinite(x[i]);
    const float a = std::fabs(x[i]);
    amax = a > amax ? a : amax;
  }
  for (std::int64_t i = 0; i < kQuantBlock; ++i) q[i] = 0;
  if (!finite) return 0x7E00;
  const float d = amax / 127.0f;
  const std::uint16_t dh = f32_to_f16_rne(d);
  // A scale that rounds to binary16 zero contributes zero whatever q holds: q stays 0
  // (and 1 / d, which may overflow for such a d, is never formed).
  if ((dh & 0x7FFFu) == 0) return dh;
  const float id = 1.0f / d;
  for (std::int64_t i = 0; i < kQuantBlock; ++i) {
    q[i] = static_cast<std::int8_t>(std::round(x[i] * id));  // half away from zero
  }
  return dh;
}

void quantize_act_row(const float* x, std::int64_t k, std::int8_t* q, float* d) {
  for (std::int64_t b = 0; b < k / kQuantBlock; ++b) {
    d[b] = f16_to_f32(quantize_q8_block(x + b * kQuantBlock, q + b * kQuantBlock));
  }
}

std::int32_t block_dot_i8(const std::int8_t* a, const std::int8_t* b) {
  std::int32_t s = 0;
  for (std::int64_t i = 0; i < kQuantBlock; ++i) {
    s += static_cast<std::int32_t>(a[i]) * static_cast<std::int32_t>(b[i]);
  }
  return s;
}

void act_half_sums(const std::int8_t* q, std::int64_t k, std::int32_t* xs) {
  for (std::int64_t h = 0; h < k / 16; ++h) {
    std::int32_t s = 0;
    for (std::int64_t i = 0; i < 16; ++i) s += q[h * 16 + i];
    xs[h] = s;
  }
}

float block_value_scaled(const BlockScales& w, bool has_min, float dx, const std::int8_t* wq,
                         const std::int8_t* xq, const std::int32_t* xs) {
  std::int32_t half[2] = {0, 0};
  for (std::int64_t i = 0; i < kQuantBlock; ++i)
    half[i / 16] += static_cast<std::int32_t>(wq[i]) * static_cast<std::int32_t>(xq[i]);
  const std::int32_t isum = w.s[0] * half[0] + w.s[1] * half[1];
  const float v = (w.d * dx) * static_cast<float>(isum);
  if (!has_min) return v;
  const std::int32_t msum = w.m[0] * xs[0] + w.m[1] * xs[1];
  return v - (w.dm * dx) * static_cast<float>(msum);
}

void quant_linear(const float* x, std::int64_t ldx, std::int64_t m, const void* weights,
                  QuantFormat f, std::int64_t n, std::int64_t k, const float* bias, float* y,
                  std::int64_t ldy) {
  const std::int64_t nb = k / kQuantBlock;
  const std::int64_t row_bytes = quant_row_bytes(f, k);
  const bool has_min = quant_format_info(f).has_min;
  std::vector<std::int8_t> xq(static_cast<std::size_t>(m * k));
  std::vector<float> xd(static_cast<std::size_t>(m * nb));
  std::vector<std::int32_t> xs(static_cast<std::size_t>(m * 2 * nb));
  for (std::int64_t r = 0; r < m; ++r) {
    quantize_act_row(x + r * ldx, k, &xq[r * k], &xd[r * nb]);
    act_half_sums(&xq[r * k], k, &xs[r * 2 * nb]);
  }
  std::int8_t wq[kQuantBlock];
  for (std::int64_t j = 0; j < n; ++j) {
    const auto* row = static_cast<const std::uint8_t*>(weights) + j * row_bytes;
    for (std::int64_t r = 0; r < m; ++r) {
      float s = 0.0f;
      for (std::int64_t b = 0; b < nb; ++b) {
        const BlockScales w = decode_block(f, row, b, wq);
        s = s + block_value_scaled(w, has_min, xd[r * nb + b], wq, &xq[r * k + b * kQuantBlock],
                                   &xs[r * 2 * nb + 2 * b]);
      }
      y[r * ldy + j] = bias != nullptr ? s + bias[j] : s;
    }
  }
}

}  // namespace detinfer::kernels::ref
