// AVX-512F/VL kernels. Compiled with -mavx512f -mavx512vl -mavx2 -mfma -mf16c; only called
// after the dispatcher checked cpuid. Everything here is in an anonymous namespace so
// no AVX-512 code can be picked up by another translation unit.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reference/exp_log_constants.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cpu {
namespace {

struct V512 {
  using reg = __m512;
  static constexpr int L = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float f) { return _mm512_set1_ps(f); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg a) { _mm512_storeu_ps(p, a); }
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static reg load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store_n(float* p, reg a, int n) { _mm512_mask_storeu_ps(p, mask(n), a); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
  static reg neg(reg a) {  // the sign bit flipped (NaNs too), as scalar -a
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg fnma(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static reg load_bf16(const std::uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static reg load_f16(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // r[i] = row i of a 16 x 16 tile becomes column i.
  // Always inlined: an out-of-line copy trips GCC 12's -Wuninitialized false positive on
  // _mm512_undefined_* inside avx512fintrin.h (and the tile loops want it inline anyway).
  __attribute__((always_inline)) static void transpose(reg r[16]) {
    reg t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {  // r[i + k]: rows i..i+3, columns k, k+4, k+8, k+12
      const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
      const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
      r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
      t[k + 4] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
      t[k + 8] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
      t[k + 12] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    }
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
      r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
      r[k + 4] = _mm512_shuffle_f32x4(t[k + 4], t[k + 12], 0x88);
      r[k + 12] = _mm512_shuffle_f32x4(t[k + 4], t[k + 12], 0xdd);
    }
  }
  // r[c] = column c + c0 of the 16 rows (r[c] lane i = rows[i][c0 + c]): 128-bit pieces of
  // four rows per register straight from memory (broadcast loads merged under masks),
  // then 4 x 4 transposes within the 128-bit lanes (half the shuffles of transpose()).
  [[gnu::always_inline]] static void load_transpose(const float* const* rows, std::int64_t c0,
                                                    reg r[16]) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      reg u[4];
#pragma GCC unroll 4
      for (int a = 0; a < 4; ++a) {
        u[a] = _mm512_broadcast_f32x4(_mm_loadu_ps(rows[a] + c0 + 4 * q));
        u[a] = _mm512_mask_broadcast_f32x4(u[a], 0x00f0, _mm_loadu_ps(rows[a + 4] + c0 + 4 * q));
        u[a] = _mm512_mask_broadcast_f32x4(u[a], 0x0f00, _mm_loadu_ps(rows[a + 8] + c0 + 4 * q));
        u[a] = _mm512_mask_broadcast_f32x4(u[a], 0xf000, _mm_loadu_ps(rows[a + 12] + c0 + 4 * q));
      }
      const reg t0 = _mm512_unpacklo_ps(u[0], u[1]), t1 = _mm512_unpackhi_ps(u[0], u[1]);
      const reg t2 = _mm512_unpacklo_ps(u[2], u[3]), t3 = _mm512_unpackhi_ps(u[2], u[3]);
      const __m512d a0 = _mm512_castps_pd(t0), a1 = _mm512_castps_pd(t1);
      const __m512d a2 = _mm512_castps_pd(t2), a3 = _mm512_castps_pd(t3);
      r[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
      r[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
      r[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
      r[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
  }
  // The same for bf16 rows (lane i = rows[i][c0 + c] widened exactly): the tile is read as
  // 16 x 8 dwords, each holding columns 2k (low half) and 2k + 1 (high half), transposed
  // like load_transpose, then each dword column splits into two binary32 columns (shift
  // left 16; mask the high half).
  [[gnu::always_inline]] static void load_transpose_bf16(const std::uint16_t* const* rows,
                                                         std::int64_t c0, reg r[16]) {
    // Float-typed shuffles of the dwords (GCC 12 warns on the integer ones' undefined
    // pass-through operand); the bits are only moved.
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      reg u[4];
#pragma GCC unroll 4
      for (int a = 0; a < 4; ++a) {
        const auto piece = [&](int row) {
          return _mm_castsi128_ps(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[row] + c0 + 8 * q)));
        };
        u[a] = _mm512_broadcast_f32x4(piece(a));
        u[a] = _mm512_mask_broadcast_f32x4(u[a], 0x00f0, piece(a + 4));
        u[a] = _mm512_mask_broadcast_f32x4(u[a], 0x0f00, piece(a + 8));
        u[a] = _mm512_mask_broadcast_f32x4(u[a], 0xf000, piece(a + 12));
      }
      const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(u[0], u[1]));
      const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(u[0], u[1]));
      const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(u[2], u[3]));
      const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(u[2], u[3]));
      const __m512d w[4] = {_mm512_unpacklo_pd(t0, t2), _mm512_unpackhi_pd(t0, t2),
                            _mm512_unpacklo_pd(t1, t3), _mm512_unpackhi_pd(t1, t3)};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i x = _mm512_castpd_si512(w[k]);
        r[8 * q + 2 * k] = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
        r[8 * q + 2 * k + 1] = _mm512_castsi512_ps(_mm512_and_si512(x, high));
      }
    }
  }
  static reg max_seq(reg m, reg x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, m, _CMP_GT_OQ), m, x);
  }
  static unsigned nan_bits(reg x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
  static unsigned eq_bits(reg x, reg m) { return _mm512_cmp_ps_mask(x, m, _CMP_EQ_OQ); }
  static reg pow2(__m512i e) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
  }
  static reg scale_pow2(reg y, reg kf) {
    const __m512i k = _mm512_cvtps_epi32(kf);
    const __m512i k1 = _mm512_srai_epi32(k, 1);
    const __m512i k2 = _mm512_sub_epi32(k, k1);
    return _mm512_mul_ps(_mm512_mul_ps(y, pow2(k1)), pow2(k2));
  }
  static reg exp_special(reg y, reg x) {
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(explog::kExpLo), _CMP_LT_OQ), y, zero());
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(explog::kExpHi), _CMP_GT_OQ), y,
                             set1(__builtin_inff()));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, add(x, x));
  }
};

// 16 lanes: linear (6 rows x 64 columns tiles), exp, attention (scores with lanes over
// 16 keys, numerator with lanes over 16 head columns).
using V = V512;
constexpr int kMaxRows = 6;
constexpr int kTileVecs = 4;      // 64 columns per tile
constexpr int kRowPanels = 4;     // M = 1: panels streamed at once (simd_linear.h)
constexpr int kScoreAccs = 16;    // score tile: heads x key blocks accumulators
constexpr int kHeadsPerPass = 8;  // numerator: 8 heads x 2 vectors accumulators
constexpr int kValueVecs = 2;
constexpr int kRegScoreMinHeads = 4;  // score_block (K tiles transposed in registers) from 4 heads
#include "kernels/cpu/simd_kernels.h"
// After simd_kernels.h (uses its exp_lanes and kChunk).
#include "kernels/cpu/attention_simd.h"
// After attention_simd.h (uses its KvLoad, prefetch_row and heads_per_pass).
#include "kernels/cpu/attention_partials_simd.h"

}  // namespace

const IsaKernels& avx512_kernels() {
  static const IsaKernels k{linear_simd,   attn_scores, attn_partials, attn_transpose_k,
                            exp_vec,       dot_fma,     silu_mul_vec,  argmax_vec,
                            max_value_vec, exp_sub_vec, add_vec};
  return k;
}

}  // namespace detinfer::kernels::cpu
