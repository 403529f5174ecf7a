// ggml's (llama.cpp's) reference quantizers, without importance matrix, for the block
// formats q4_1, q5_1, q2_K, q3_K, q4_K, q5_K and q6_K: plain scalar binary32 code that
// reproduces the bytes of ggml's quantize_row_*_ref on x86-64 (ggml-quants.c compiled
// without FMA contraction). Deterministic: no SIMD, no state, every float operation one
// binary32 operation (round to nearest even) in the stated order.
//
// Common rules. "fp16(v)" = binary16 bits of v, round to nearest even (f32_to_f16_rne),
// little-endian; "h(v)" = fp16(v) widened back exactly. nearest_int, make_qkx2_quants,
// make_q3_quants and make_qx_quants are specified in quant_kquantize_detail.h; clamp(v,
// a, b) = min(max(v, a), b). x is the block's input, in order. Every quantizer returns
// false (out unspecified) when an input is NaN or infinite, when a stored binary16 scale
// (d, m or dmin) rounds to inf, or when a sub-block scale or min computed in binary32 is
// not finite (then |x| is so large that ggml's x^2 or x^3 sums overflow and the exact
// scale is far beyond binary16; ggml would write a degenerate block).
//
// q4_1 / q5_1 (32 values; B = 15 / 31): min = the smallest x, max = the largest; d =
//   (max - min) / B; id = d != 0 ? 1 / d : 0 (binary32 d, not h(d)); store fp16(d),
//   fp16(min); q[i] = trunc(((x[i] - min) * id) + 0.5f) (truncation toward zero as x86's
//   cvttss2si: its int32 result, low 8 bits kept); q4_1 stores min(15, int8(q)) as a
//   uint8 (q is in [0, 15] except when d is a binary32 subnormal: then 0), q5_1 the low
//   8 bits of q. Layouts: q4_1 = d, m, qs[16] (byte j: q[j] | q[j + 16] << 4); q5_1 = d,
//   m, u32 qh (bit j = bit 4 of q[j]), qs[16] (low nibbles as q4_1).
//
// q2_K (256 values, 16 sub-blocks of 16): for sub-block j: w = |x|, scale_j, min_j =
//   make_qkx2_quants(16, 3, x_j, w, L_j, rmin -0.5, rdelta 0.1, nstep 15, mad). max_s /
//   max_m = the largest scale_j / min_j (starting from 0). If max_s > 0: iscale = 15 /
//   max_s; sc[j] = uint8(nearest_int(iscale * scale_j)); d = fp16(max_s / 15); else sc = 0,
//   d = 0. If max_m > 0: iscale = 15 / max_m; sc[j] |= uint8(nearest_int(iscale * min_j)
//   << 4); dmin = fp16(max_m / 15); else dmin = 0. Then for each j: dj = h(d) * (sc[j] &
//   15); if dj == 0 keep L_j from make_qkx2_quants; else mj = h(dmin) * (sc[j] >> 4) and
//   L[i] = clamp(nearest_int((x[i] + mj) / dj), 0, 3). Layout: scales[16] = sc, qs[64]
//   (qs[32n + l] = L[128n + l] | L[+32] << 2 | L[+64] << 4 | L[+96] << 6), d, dmin.
//
// q3_K (256 values, 16 sub-blocks of 16): scale_j = make_q3_quants(16, 4, x_j, L_j) (L in
//   [0, 7]). max_s = the scale_j of largest |scale_j| (the first on ties; 0 if all 0). If
//   max_s != 0: iscale = -32 / max_s; l6[j] = clamp(int8(nearest_int(iscale * scale_j)),
//   -32, 31) + 32; scales = the 12-byte packing of l6 (low nibble of j < 8 in byte j, of j
//   >= 8 in the high nibble of byte j - 8; bits 4..5 of l6[j] at bits 2(j / 4) of byte 8 +
//   j % 4); d = fp16(1 / iscale). Else scales = 0, d = 0. For each j: dj = h(d) * (l6[j] -
//   32) (from the packed bytes); if dj == 0 keep L_j; else L[i] = clamp(nearest_int(x[i] /
//   dj), -4, 3) + 4. hmask bit (e / 32) of byte e % 32 = (L[e] > 3); then L[e] -= 4 where
//   set; qs packed as q2_K. Layout: hmask[32], qs[64], scales[12], d.
//
// q4_K / q5_K (256 values, 8 sub-blocks of 32; N = 15 / 31): for sub-block j: s2 = sum of
//   x*x in order; av = sqrtf(s2 / 32); w = av + |x|; scale_j, min_j =
//   make_qkx2_quants(32, N, x_j, w, L_j, rmin -1 / -0.5, rdelta 0.1, nstep 20 / 15,
//   squared error). max_s / max_m as q2_K; is = max_s > 0 ? 63 / max_s : 0, im = max_m > 0 ?
//   63 / max_m : 0; ls[j] = min(63, uint8(nearest_int(is * scale_j))), lm[j] likewise with
//   im, min_j; scales = get_scale_min_k4 packing of ls, lm (j < 4: byte j = ls, byte j + 4
//   = lm; j >= 4: byte j + 4 = (ls & 15) | (lm & 15) << 4, bits 6..7 of byte j - 4 = ls >>
//   4, bits 6..7 of byte j = lm >> 4); d = fp16(max_s / 63), dmin = fp16(max_m / 63). For
//   each j: dj = h(d) * ls, if 0 keep L_j, else mj = h(dmin) * lm, L[i] =
//   clamp(nearest_int((x[i] + mj) / dj), 0, N). q4_K layout: d, dmin, scales[12], qs[128]
//   (qs[32k + l] = L[64k + l] | L[64k + 32 + l] << 4). q5_K: d, dmin, scales[12], qh[32]
//   (bit s of qh[l] = bit 4 of L[32s + l]), qs[128] (the low 4 bits, as q4_K).
//
// q6_K (256 values, 16 sub-blocks of 16): scale_j = make_qx_quants(16, 32, x_j, L_j) (L
//   in [0, 63]); max_s = the scale_j of largest |scale_j| (first on ties). If |max_s| <
//   1e-15: all 210 bytes 0. Else iscale = -128 / max_s; d = fp16(1 / iscale); sc[j] =
//   int8(min(127, nearest_int(iscale * scale_j))). For each j: dj = h(d) * sc[j]; if 0
//   keep L_j; else L[i] = clamp(nearest_int(x[i] / dj), -32, 31) + 32. Layout: ql[128]
//   (ql[64n + l] = (L[128n + l] & 15) | (L[128n + 64 + l] & 15) << 4, ql[64n + 32 + l] =
//   (L[128n + 32 + l] & 15) | (L[128n + 96 + l] & 15) << 4), qh[64] (qh[32n + l] = the
//   high 2 bits of L[128n + 32t + l] at bits 2t, t = 0..3), scales[16] = sc, d.
#pragma once

#include <cstdint>

namespace detinfer::kernels::ref {

// Block sizes in bytes (ggml): 32 values for q4_1 / q5_1, 256 for the K formats.
inline constexpr int kQ4_1Bytes = 20;
inline constexpr int kQ5_1Bytes = 24;
inline constexpr int kQ2KBytes = 84;
inline constexpr int kQ3KBytes = 110;
inline constexpr int kQ4KBytes = 144;
inline constexpr int kQ5KBytes = 176;
inline constexpr int kQ6KBytes = 210;
inline constexpr int kQk1Values = 32;     // values per q4_1 / q5_1 block
inline constexpr int kSuperValues = 256;  // values per K-format super-block (ggml QK_K)

// Each quantizes one block of finite binary32 values into the ggml block bytes at `out`.
// Returns false (out unspecified) on a non-finite input or an overflowing scale (above).
bool quantize_q4_1_block(const float* x, std::uint8_t* out);
bool quantize_q5_1_block(const float* x, std::uint8_t* out);
bool quantize_q2_k_block(const float* x, std::uint8_t* out);
bool quantize_q3_k_block(const float* x, std::uint8_t* out);
bool quantize_q4_k_block(const float* x, std::uint8_t* out);
bool quantize_q5_k_block(const float* x, std::uint8_t* out);
bool quantize_q6_k_block(const float* x, std::uint8_t* out);

}  // namespace detinfer::kernels::ref
