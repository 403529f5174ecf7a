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

void quant_linear(const float* x, std::int64_t ldx, std::int64_t m, const void* weights,
                  QuantFormat f, std::int64_t n, std::int64_t k, const float* bias, float* y,
                  std::int64_t ldy) {
  const std::int64_t nb = k / kQuantBlock;
  const std::int64_t row_bytes = quant_row_bytes(f, k);
  std::vector<std::int8_t> xq(static_cast<std::size_t>(m * k));
  std::vector<float> xd(static_cast<std::size_t>(m * nb));
  for (std::int64_t r = 0; r < m; ++r) quantize_act_row(x + r * ldx, k, &xq[r * k], &xd[r * nb]);
  std::int8_t wq[kQuantBlock];
  for (std::int64_t j = 0; j < n; ++j) {
    const auto* row = static_cast<const std::uint8_t*>(weights) + j * row_bytes;
    for (std::int64_t r = 0; r < m; ++r) {
      float s = 0.0f;
      for (std::int64_t b = 0; b < nb; ++b) {
        const float dw = decode_block(f, row, b, wq);
        s = s + block_value(dw, xd[r * nb + b], block_dot_i8(wq, &xq[r * k + b * kQuantBlock]));
      }
      y[r * ldy + j] = bias != nullptr ? s + bias[j] : s;
    }
  }
}

}  // namespace detinfer::kernels::ref
