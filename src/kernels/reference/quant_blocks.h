// The weight block formats of quantized spec v1 (docs/numerics.md, "Quantized linear"):
// exact decoding of one 32-weight block of any format into 32 integers and its scales, and
// the deterministic per-block weight quantizers (ggml's reference algorithms, with the rules
// for non-finite and zero scales stated in the doc). The spec in code, like reference.h.
#pragma once

#include <cstdint>

#include "kernels/quant.h"

namespace detinfer::kernels::ref {

// The scales of one decoded 32-weight block. With q[i] the block's integers:
//   w[i] = d * (s[i / 16] * q[i]) - dm * m[i / 16]
// d * (s * q) is exact in binary32 (11 significant bits times an integer below 2^13); the
// min term dm * m is exact too, so the only rounding of a weight is the subtraction.
// Formats without sub-scales have s = {1, 1}; formats without mins dm = 0, m = {0, 0}.
struct BlockScales {
  float d = 0.0f;              // binary16 d (of the block or super-block), widened exactly
  std::int32_t s[2] = {1, 1};  // integer sub-scales of elements 0..15 and 16..31
  float dm = 0.0f;             // binary16 dmin widened (q4_1 / q5_1: -f16(m), exact)
  std::int32_t m[2] = {0, 0};  // integer mins (q4_1 / q5_1: {1, 1})
};

// 32-weight block b of a row of `f` (for the K formats, sub-blocks 2(b % 8) and 2(b % 8) + 1
// of super-block b / 8): q[0..31] = the integer weights and the block's scales. Q4_0 gives
// q in [-8, 7], Q5_0 [-16, 15], Q8_0 the stored int8, Q4_1 / Q4_K [0, 15], Q5_1 / Q5_K
// [0, 31], Q2_K [0, 3], Q3_K [-4, 3], Q6_K [-32, 31].
BlockScales decode_block(QuantFormat f, const std::uint8_t* row, std::int64_t b, std::int8_t* q);

// The 32 weights of block b decoded to binary32 (the formula of BlockScales).
void dequantize_block(QuantFormat f, const std::uint8_t* row, std::int64_t b, float* y);

// Quantizes quant_format_info(f).block_elems finite values into one block of `f` at out
// (quant_format_info(f).block_bytes bytes). Returns false (out unspecified) when a value is
// NaN or infinite or a scale overflows binary16.
bool quantize_block(QuantFormat f, const float* x, std::uint8_t* out);

}  // namespace detinfer::kernels::ref
