// AVX2 quantized panel kernel and activation quantizer (compiled with -mavx2 -mfma -mf16c;
// called only after the dispatcher checked cpuid). Everything in an anonymous namespace
// (see avx2.cpp).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels::cpu {
namespace {
#include "kernels/cpu/qlinear_dot256.h"
#include "kernels/cpu/qlinear_simd.h"

// x * id rounded half away from zero (std::round), as int32: r = trunc(t), then r + sign(t)
// when |t - r| >= 0.5. t - r is exact (|t| < 2^23), so this is std::round's result for
// every t; adding 0.5 before truncating is not (0.49999997 + 0.5 rounds to 1).
inline __m256i round_away(__m256 t) {
  const __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_and_ps(t, _mm256_set1_ps(-0.0f));
  const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(t, r));
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                  _mm256_or_ps(_mm256_set1_ps(1.0f), sign));
  return _mm256_cvtps_epi32(_mm256_add_ps(r, up));  // exact: r + up is an integer
}

// One block of 32 (ref::quantize_q8_block): amax and the finite test in vectors, the
// scale in scalar binary32 as the reference forms it, q in vectors; a block with a NaN,
// an infinity or a scale that rounds to binary16 zero goes to the reference itself.
// Returns d = f16_to_f32(dh); xs (when not null) gets the two half sums.
float quantize_block(const float* x, std::int8_t* q, std::int32_t* xs) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  __m256 v[4], amax = _mm256_setzero_ps();
  int finite = 0xFF;
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    const __m256 a = _mm256_and_ps(v[i], abs_mask);
    finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_LT_OQ));  // false for NaN
    amax = _mm256_max_ps(amax, a);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float d = _mm_cvtss_f32(m4) / 127.0f;
  // F16C's round-to-nearest-even narrowing and its widening give f32_to_f16_rne's and
  // f16_to_f32's bits for every value that is not a NaN (QuantActs.F16cEqualsHalfRound);
  // a NaN d goes to the reference below.
  const auto dh = static_cast<std::uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
  if (finite != 0xFF || (dh & 0x7FFFu) == 0) {
    const std::uint16_t h = ref::quantize_q8_block(x, q);
    if (xs != nullptr) ref::act_half_sums(q, ref::kQuantBlock, xs);
    return f16_to_f32(h);
  }
  const __m256 id = _mm256_set1_ps(1.0f / d);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) qi[i] = round_away(_mm256_mul_ps(v[i], id));
  // |q| <= 127: the saturating packs are exact; they interleave 128-bit lanes, undone by
  // the dword permute.
  const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                 _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p8);
  if (xs != nullptr) {
    for (int h = 0; h < 2; ++h) {  // exact integer sums of q[16h .. 16h + 15]
      const __m256i s8 = _mm256_add_epi32(qi[2 * h], qi[2 * h + 1]);
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      xs[h] = _mm_cvtsi128_si32(s4);
    }
  }
  return _cvtsh_ss(dh);
}

void quantize_acts_vec(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                       std::int8_t* q, float* d, std::int32_t* xs) {
  const std::int64_t nb = k / ref::kQuantBlock;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t b = 0; b < nb; ++b)
      d[r * nb + b] =
          quantize_block(x + r * ldx + b * ref::kQuantBlock, q + r * k + b * ref::kQuantBlock,
                         xs != nullptr ? xs + (r * nb + b) * 2 : nullptr);
}
}  // namespace

QLinearFn qlinear_avx2() { return qlinear_panels<Dot256>; }
QuantizeActsFn quantize_acts_avx2() { return quantize_acts_vec; }

}  // namespace detinfer::kernels::cpu
