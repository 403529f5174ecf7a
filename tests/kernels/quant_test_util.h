// Random ggml blocks for the quantized-format tests (docs/numerics.md, "Quantized linear"):
// random bytes everywhere, so every integer, sub-scale and min pattern occurs, then every
// binary16 scale field a random finite value of either sign below 2 in magnitude.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "detinfer/philox.h"
#include "kernel_test_util.h"
#include "kernels/quant.h"

namespace detinfer::kernels::testing {

// Byte offsets of the binary16 scale fields (d, and m / dmin) in one block of `f`.
inline std::vector<int> half_offsets(QuantFormat f) {
  switch (f) {
    case QuantFormat::kQ2_K:
      return {80, 82};
    case QuantFormat::kQ3_K:
      return {108};
    case QuantFormat::kQ6_K:
      return {208};
    case QuantFormat::kQ4_1:
    case QuantFormat::kQ5_1:
    case QuantFormat::kQ4_K:
    case QuantFormat::kQ5_K:
      return {0, 2};
    default:
      return {0};
  }
}

// The bytes [first, last) of a ggml block that hold its quants, not d, dm or the
// sub-scales (the layouts half_offsets reads the scales of): q4_0 d, qs; q4_1 d, m, qs;
// q5_0 d, qh, qs; q5_1 d, m, qh, qs; q2_k scales, qs, d, dmin; q3_k hmask, qs, scales, d;
// q4_k d, dmin, scales, qs; q5_k d, dmin, scales, qh, qs; q6_k ql, qh, scales, d.
inline std::pair<int, int> quant_byte_range(QuantFormat f) {
  switch (f) {
    case QuantFormat::kQ4_0:
      return {2, 18};
    case QuantFormat::kQ4_1:
      return {4, 20};
    case QuantFormat::kQ5_0:
      return {2, 22};
    case QuantFormat::kQ5_1:
      return {4, 24};
    case QuantFormat::kQ2_K:
      return {16, 80};
    case QuantFormat::kQ3_K:
      return {0, 96};
    case QuantFormat::kQ4_K:
      return {16, 144};
    case QuantFormat::kQ5_K:
      return {16, 176};
    case QuantFormat::kQ6_K:
      return {0, 192};
    default:
      return {2, 34};  // q8_0: d, qs
  }
}

inline std::vector<std::uint8_t> random_blocks(QuantFormat f, std::int64_t blocks,
                                               std::uint64_t stream) {
  const std::int64_t bytes = quant_format_info(f).block_bytes;
  std::vector<std::uint8_t> q(static_cast<std::size_t>(blocks * bytes));
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = static_cast<std::uint8_t>(philox_block(77, stream, i)[0]);
  const std::vector<std::uint16_t> h = random_f16(2 * blocks, stream + 1);
  const std::vector<int> at = half_offsets(f);
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (std::size_t s = 0; s < at.size(); ++s) {
      const std::uint16_t v = h[2 * b + s] & 0xBFFFu;  // exponent field <= 15: |scale| < 2
      q[b * bytes + at[s]] = static_cast<std::uint8_t>(v & 0xFF);
      q[b * bytes + at[s] + 1] = static_cast<std::uint8_t>(v >> 8);
    }
  }
  return q;
}

// Random weights of format f. Q8_0 / Q4_0 / Q5_0: random floats of mixed magnitudes (per
// row) quantized. The other formats: random block bytes (every bit pattern of the integers,
// sub-scales and mins) with random finite binary16 scales of either sign.
inline std::vector<std::uint8_t> random_q(QuantFormat f, std::int64_t n, std::int64_t k,
                                          std::uint64_t stream) {
  if (f == QuantFormat::kQ8_0 || f == QuantFormat::kQ4_0 || f == QuantFormat::kQ5_0) {
    std::vector<std::uint8_t> q(static_cast<std::size_t>(n * quant_row_bytes(f, k)));
    std::vector<float> w = random_floats(n * k, stream);
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < k; ++i) w[j * k + i] *= static_cast<float>(1 + j % 7) * 0.25f;
    quantize_rows(f, w.data(), n, k, q.data());
    return q;
  }
  return random_blocks(f, n * k / quant_format_info(f).block_elems, stream);
}

inline bool k_format(QuantFormat f) { return quant_format_info(f).block_elems == 256; }

}  // namespace detinfer::kernels::testing
