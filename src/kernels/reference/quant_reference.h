// The quantized linear of quantized spec v1 (docs/numerics.md, "Quantized linear") as plain
// scalar C++: the definition every optimized quantized kernel is tested against, bit for
// bit. Compiled with -ffp-contract=off like every file.
#pragma once

#include <cstdint>

#include "kernels/quant.h"
#include "kernels/reference/quant_blocks.h"

namespace detinfer::kernels::ref {

// Elements per activation block (ggml's q8_0 block): every quantized weight format of
// spec v1 pairs a weight block of 32 with one activation block of 32.
inline constexpr std::int64_t kQuantBlock = 32;

// Quantizes one block of 32 values q8_0-style:
//   amax = largest |x[i]| (exact); d = amax / 127 (binary32, RNE);
//   id = d != 0 ? 1 / d : 0; q[i] = round-half-away-from-zero(x[i] * id) (|q| <= 127);
//   dh = binary16 bits of d (RNE, overflow to inf).
// A block holding a NaN or an infinity gets q = 0 and dh = 0x7E00 (a quiet NaN), so its
// result is NaN. Returns dh.
std::uint16_t quantize_q8_block(const float* x, std::int8_t* q);

// A row of k values (k a multiple of 32): q[k], d[k / 32] = f16_to_f32(dh) of each block.
void quantize_act_row(const float* x, std::int64_t k, std::int8_t* q, float* d);

// Exact integer dot product of two blocks of 32 int8 (int32, no overflow possible).
std::int32_t block_dot_i8(const std::int8_t* a, const std::int8_t* b);

// The value of one block pair: (dw * dx) * float(isum), two binary32 products (the first
// is exact for binary16 scales; float(isum) is exact: |isum| < 2^24).
inline float block_value(float dw, float dx, std::int32_t isum) {
  return (dw * dx) * static_cast<float>(isum);
}

// The two activation half sums of block b: xs[0] = sum of q[32b .. 32b+15], xs[1] of the
// rest (exact integers; only the formats with a min term read them).
void act_half_sums(const std::int8_t* q, std::int64_t k, std::int32_t* xs);

// The value of one block pair for any format (docs/numerics.md "Block dot product"): with
// lo / hi the exact integer dot products of the weight and activation halves (k 0..15 and
// 16..31 of the block) and xs the activation half sums,
//   isum = s[0] * lo + s[1] * hi;  v = (d * dx) * float(isum)
//   with a min term:  msum = m[0] * xs[0] + m[1] * xs[1];  v = v - (dm * dx) * float(msum)
// every integer exact (|isum| < 2^24, |msum| < 2^18), so float() is exact too. For q8_0,
// q4_0 and q5_0 (s = {1, 1}, no min) this is block_value of the whole block's dot product.
float block_value_scaled(const BlockScales& w, bool has_min, float dx, const std::int8_t* wq,
                         const std::int8_t* xq, const std::int32_t* xs);

// y[r][j] = fold over blocks b = 0..k/32-1 in order of block_value_scaled (s = +0;
// s = s + v), then s + bias[j] when bias is given.
// `weights` is n rows of quant_row_bytes(f, k) bytes, in the ggml block layout.
void quant_linear(const float* x, std::int64_t ldx, std::int64_t m, const void* weights,
                  QuantFormat f, std::int64_t n, std::int64_t k, const float* bias, float* y,
                  std::int64_t ldy);

}  // namespace detinfer::kernels::ref
