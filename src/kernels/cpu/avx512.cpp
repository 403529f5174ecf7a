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
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg fnma(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static reg load_bf16(const std::uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static reg load_f16(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static reg max_seq(reg m, reg x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, m, _CMP_GT_OQ), m, x);
  }
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

// 16 lanes: linear (6 rows x 64 columns tiles), exp, attention for groups > 8 heads.
namespace w16 {
using V = V512;
constexpr int kMaxRows = 6;
constexpr int kTileVecs = 4;  // 64 columns per tile
constexpr int kHeadsPerPass = 8;
constexpr int kValueVecs = 2;
#include "kernels/cpu/simd_kernels.h"
}  // namespace w16

// 8 lanes with 32 registers: attention for GQA groups of <= 8 query heads (lanes run
// over heads, so 16 lanes would idle half of each instruction).
namespace w8 {
#include "kernels/cpu/vec256.h"
using V = V256;
constexpr int kMaxRows = 6;
constexpr int kTileVecs = 2;
constexpr int kHeadsPerPass = 8;  // 8 heads x 2 vectors = 16 accumulators
constexpr int kValueVecs = 2;
#include "kernels/cpu/simd_kernels.h"
}  // namespace w8

// Score lanes run over the query heads of a kv group; with at most 8 heads (GQA models)
// 8-lane instructions do the same score work at half width, which is at least as fast
// (twice as fast on CPUs that split 512-bit ops). The numerator's lanes run over head
// columns, where 16 lanes halve the instructions: scores w8, values w16. Same bits
// either way (every lane performs the reference's sequence).
void attention_avx512(const float* q, std::int64_t group, std::int64_t num_keys,
                      std::int64_t kv_head, const PagedKvView& kv, const std::int64_t* token_offset,
                      float scale, float* out, float* scratch) {
  if (group > 8) {
    w16::attention_simd(q, group, num_keys, kv_head, kv, token_offset, scale, out, scratch);
    return;
  }
  const std::int64_t d = kv.head_dim;
  if (num_keys <= 0) {
    for (std::int64_t i = 0; i < group * d; ++i) out[i] = 0.0f;
    return;
  }
  alignas(64) float dens[8];
  const int G = static_cast<int>(group);
  const float* E =
      w8::score_softmax(q, G, num_keys, kv_head, kv, token_offset, scale, scratch, dens);
  w16::attend_all<8>(E, G, num_keys, kv.v_pool + kv_head * d, token_offset, d, dens, out);
}

}  // namespace

const IsaKernels& avx512_kernels() {
  static const IsaKernels k{w16::linear_simd, attention_avx512, w16::exp_vec, w16::dot_fma};
  return k;
}

}  // namespace detinfer::kernels::cpu
