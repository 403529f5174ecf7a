// Internal helpers of the ggml reference quantizers (reference/quant_kquantize.h): the
// rounding primitives and the three per-sub-block scale searches that ggml's k-quants use
// (ggml-quants.c: nearest_int, make_qkx2_quants, make_q3_quants, make_qx_quants with
// rmse_type 1 and no weights). Each function below is a line-by-line specification:
// every float operation is one binary32 operation (round to nearest even) performed in
// the order written; integers convert to binary32 exactly (all are below 2^24).
#pragma once

#include <cstdint>

namespace detinfer::kernels::ref::kquant {

// ggml's GROUP_MAX_EPS: a sub-block whose largest |x| is below it counts as all zero.
inline constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int(v): s = v + 12582912.0f (= 1.5 * 2^23, one binary32 add), then
// (bits(s) & 0x7FFFFF) - 0x400000. For |v| <= 2^22 - 1 the sum's ulp is 1, so the add
// itself rounds v to the nearest integer, ties to even, and the low mantissa bits hold
// that integer offset by 2^22: the result is v rounded half to even. ggml asserts that
// range (in debug builds only); outside it (reachable only in degenerate blocks, e.g. an
// inf or NaN product) we keep the same bit manipulation, a fixed function of v: inf
// gives -4194304, a NaN 0, a huge finite v a wrapped value in [-2^22, 2^22).
int nearest_int(float v);

// The conversion float -> int32 that x86-64 performs for a C cast (cvttss2si): truncation
// toward zero; NaN or a value outside [-2^31, 2^31) gives INT32_MIN. ggml's q4_1 / q5_1
// casts ((int8_t) / (uint8_t) of a float) keep the low 8 bits of this result; the
// out-of-range case happens only when the block's scale is a binary32 subnormal.
std::int32_t trunc_i32_x86(float v);

// make_qkx2_quants (asymmetric: value ~ scale * L[i] - the_min), for n <= 32 values with
// weights w[] and levels L in [0, nmax]; returns the scale, *the_min >= 0 (or -0).
//  1. min = max = x[0]; sum_w = w[0]; sum_x = sum_w * x[0]; for i >= 1 in order:
//     if x[i] < min: min = x[i]; if x[i] > max: max = x[i]; sum_w += w[i];
//     sum_x += w[i] * x[i].
//  2. if min > 0: min = 0. If max == min: L = 0, *the_min = -min, return 0.
//  3. iscale = nmax / (max - min); scale = 1 / iscale; for each i: L[i] =
//     clamp(nearest_int(iscale * (x[i] - min)), 0, nmax); diff = (scale * L[i] + min) -
//     x[i]; e = use_mad ? |diff| : diff * diff; best += w[i] * e (best starts at 0).
//  4. for is = 0..nstep: iscale = ((rmin + rdelta * is) + nmax) / (max - min) and Laux[i] =
//     clamp(nearest_int(iscale * (x[i] - min)), 0, nmax), both with the CURRENT min (the
//     last accepted refit's m, not the data's min); in order over i: sum_l +=
//     w[i] * l; sum_l2 += (w[i] * l) * l; sum_xl += (w[i] * l) * x[i] (all from 0);
//     D = sum_w * sum_l2 - sum_l * sum_l. If D > 0: s = (sum_w * sum_xl - sum_x *
//     sum_l) / D; m = (sum_l2 * sum_x - sum_l * sum_xl) / D; if m > 0: m = 0,
//     s = sum_xl / sum_l2; err = sum over i of w[i] * e(s * Laux[i] + m - x[i]) (as in
//     step 3); if err < best: L = Laux, best = err, scale = s, min = m.
//  5. *the_min = -min; return scale.
float make_qkx2_quants(int n, int nmax, const float* x, const float* w, std::uint8_t* L,
                       float* the_min, float rmin, float rdelta, int nstep, bool use_mad);

// make_q3_quants with do_rmse (symmetric, weights x^2), n <= 16 values, levels L in
// [0, 2 * nmax - 1] (the integer l + nmax, l in [-nmax, nmax - 1]); returns the scale.
//  1. amax / max = the largest |x[i]| and its signed value (first on ties). If amax <
//     kGroupMaxEps: L = 0, return 0.
//  2. iscale = -nmax / max; l[i] = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
//     sumlx += ((x*x) * x) * l; suml2 += ((x*x) * l) * l (binary32, in order).
//  3. up to 5 passes; in each, for i in order: w = x*x; slx = sumlx - (w * x) * l[i];
//     if slx > 0: sl2 = suml2 - (w * l[i]) * l[i]; nl = clamp(nearest_int((x * sl2) /
//     slx), -nmax, nmax - 1); if nl != l[i]: slx += (w * x) * nl; sl2 += (w * nl) * nl;
//     if sl2 > 0 and (slx * slx) * suml2 > (sumlx * sumlx) * sl2: l[i] = nl, sumlx =
//     slx, suml2 = sl2, count a change. A pass with no change ends the loop.
//  4. L[i] = l[i] + nmax; return suml2 > 0 ? sumlx / suml2 : 0.
float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L);

// make_qx_quants with rmse_type 1 and no importance weights (weights x^2), n <= 16,
// levels L in [0, 2 * nmax - 1]; returns the scale.
//  1. amax / max as in make_q3_quants; amax < kGroupMaxEps: L = 0, return 0.
//  2. iscale = -nmax / max; l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
//     L[i] = l + nmax; sumlx += ((x*x) * x) * l; suml2 += ((x*x) * l) * l.
//     scale = suml2 != 0 ? sumlx / suml2 : 0; best = scale * sumlx.
//  3. for is = -9..9, is != 0: iscale = -(nmax + 0.1f * is) / max (0.1f * is, then +
//     nmax, negate, divide); recompute the sums with that iscale (same formulas); if
//     suml2 > 0 and sumlx * sumlx > best * suml2: L[i] = l + nmax for this iscale,
//     scale = sumlx / suml2, best = scale * sumlx.
//  4. return scale.
float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L);

// Little-endian binary16 store; false when the rounded value is inf or NaN.
bool store_f16(float v, std::uint8_t* p);
// The binary16 at p widened exactly.
float load_f16(const std::uint8_t* p);

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) from the 12
// packed bytes of q4_K / q5_K, and its inverse (bytes fully written).
void unpack_scale_min_k4(int j, const std::uint8_t* packed, std::uint8_t* sc, std::uint8_t* m);
void pack_scale_min_k4(const std::uint8_t* ls, const std::uint8_t* lm, std::uint8_t* packed);

// The 12 packed bytes of q3_K's sixteen 6-bit (biased by 32) scales, and the inverse.
void pack_q3k_scales(const std::uint8_t* l6, std::uint8_t* packed);
int unpack_q3k_scale(int j, const std::uint8_t* packed);

}  // namespace detinfer::kernels::ref::kquant
