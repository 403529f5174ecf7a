// The weight block formats of quantized spec v1 (docs/numerics.md, "Quantized linear"):
// exact decoding of one ggml block into 32 int8 values and its binary32 scale, and the
// deterministic per-block weight quantizers (ggml's reference algorithms, with the rules
// for non-finite and zero scales stated in the doc). The spec in code, like reference.h.
#pragma once

#include <cstdint>

#include "kernels/quant.h"

namespace detinfer::kernels::ref {

// Block b of a row of `f` blocks: q[0..31] = the integer weights (value = scale * q[i]),
// returns the scale (binary16 d widened exactly). Q4_0 gives q in [-8, 7], Q5_0 [-16, 15],
// Q8_0 the stored int8.
float decode_block(QuantFormat f, const std::uint8_t* row, std::int64_t b, std::int8_t* q);

// Quantizes 32 finite values into one block of `f` at out (quant_format_info(f).block_bytes
// bytes). Returns false (out unspecified) when a value is NaN or infinite or the scale
// overflows binary16.
bool quantize_block(QuantFormat f, const float* x, std::uint8_t* out);

}  // namespace detinfer::kernels::ref
