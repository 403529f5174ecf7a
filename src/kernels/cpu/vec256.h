// 8-lane float vector (AVX2 + FMA + F16C) for simd_kernels.h. Included only by the ISA
// translation units, inside their anonymous namespace (never by baseline code).
// With -mavx512vl (avx512.cpp) the compiler may also use ymm16-31 for it.

struct V256 {
  using reg = __m256;
  static constexpr int L = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float f) { return _mm256_set1_ps(f); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg a) { _mm256_storeu_ps(p, a); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg load_n(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store_n(float* p, reg a, int n) { _mm256_maskstore_ps(p, mask(n), a); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
  static reg neg(reg a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }  // as scalar -a
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg fnma(reg a, reg b, reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static reg load_bf16(const std::uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static reg load_f16(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // r[i] = row i of an 8 x 8 tile becomes column i.
  [[gnu::always_inline]] static void transpose(reg r[8]) {
    reg t[8], u[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
  // r[c] = column c0 + c of the 8 rows (lane i = rows[i][c0 + c]). Compiled for
  // attention_simd.h's score_block, which avx2.cpp never runs (kRegScoreMinHeads).
  [[gnu::always_inline]] static void load_transpose(const float* const* rows, std::int64_t c0,
                                                    reg r[8]) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = load(rows[i] + c0);
    transpose(r);
  }
  static reg max_seq(reg m, reg x) {
    return _mm256_blendv_ps(m, x, _mm256_cmp_ps(x, m, _CMP_GT_OQ));
  }
  static unsigned nan_bits(reg x) {  // bit i: lane i is NaN
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
  }
  static unsigned eq_bits(reg x, reg m) {  // bit i: lane i == m (IEEE ==: -0 == +0)
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(x, m, _CMP_EQ_OQ)));
  }
  static reg pow2(__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  }
  static reg scale_pow2(reg y, reg kf) {
    const __m256i k = _mm256_cvtps_epi32(kf);
    const __m256i k1 = _mm256_srai_epi32(k, 1);
    const __m256i k2 = _mm256_sub_epi32(k, k1);
    return _mm256_mul_ps(_mm256_mul_ps(y, pow2(k1)), pow2(k2));
  }
  static reg exp_special(reg y, reg x) {
    y = _mm256_blendv_ps(y, zero(), _mm256_cmp_ps(x, set1(explog::kExpLo), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, set1(__builtin_inff()),
                         _mm256_cmp_ps(x, set1(explog::kExpHi), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, add(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
};
