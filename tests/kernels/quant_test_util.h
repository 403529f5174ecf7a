// Random ggml blocks for the quantized-format tests (docs/numerics.md, "Quantized linear"):
// random bytes everywhere, so every integer, sub-scale and min pattern occurs, then every
// binary16 scale field a random finite value of either sign below 2 in magnitude.
#pragma once

#include <cstdint>
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

}  // namespace detinfer::kernels::testing
