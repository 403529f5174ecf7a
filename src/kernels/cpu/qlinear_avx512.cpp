// AVX-512 quantized panel kernels (compiled with -mavx512f -mavx512vl
// -mavx512vnni -mavx2 -mfma -mf16c; called only after the dispatcher checked cpuid). The
// VNNI variant runs 16 columns per vector with vpdpbusd on (x + 128) (unsigned) times w
// (signed), then subtracts 128 * sum(w); the other variant is the 256-bit maddubs form.
// Both sums are exact integers, so a CPU without VNNI gives the same bits (the tests run
// both where VNNI exists).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"

namespace detinfer::kernels::cpu {
namespace {
#include "kernels/cpu/qlinear_dot256.h"
#include "kernels/cpu/qlinear_simd.h"

struct DotVnni512 {
  using ireg = __m512i;
  using freg = __m512;
  static constexpr int L = 16;
  static constexpr bool kShifted = true;       // x4 holds x + 128 (as unsigned bytes)
  static constexpr int kRowCols = 2;           // vectors per tile of kMaxQRows rows
  static constexpr bool kSum16 = false;        // dotu accumulates in int32 in one instruction
  static constexpr int kNibbleStreamCols = 4;  // the whole panel, as the int8 form
  static ireg izero() { return _mm512_setzero_si512(); }
  static ireg load(const std::int8_t* p) { return _mm512_load_si512(p); }
  static ireg dot(ireg acc, ireg w, std::int32_t x4) {
    return _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(x4), w);
  }
  // The nibble form: x unshifted, vpdpbusd's unsigned operand is u.
  static ireg dotu(ireg acc, ireg u, std::int32_t x4) {
    return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(x4));
  }
  static void nibbles(const std::int8_t* p, ireg& lo, ireg& hi) {
    const __m512i v = load(p), mask = _mm512_set1_epi8(0x0F);
    lo = _mm512_and_si512(v, mask);
    hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), mask);
  }
  static ireg shl(ireg v, int n) { return _mm512_slli_epi32(v, n); }
  static ireg shr(ireg v, int n) { return _mm512_srli_epi32(v, n); }
  static ireg and8(ireg v, int byte) {
    return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(byte)));
  }
  static ireg or8(ireg a, ireg b) { return _mm512_or_si512(a, b); }
  // a | (b & byte) in every byte, one vpternlogd (0xF8: A | (B & C)).
  static ireg or_and8(ireg a, ireg b, int byte) {
    return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(static_cast<char>(byte)), 0xF8);
  }
  // sum (x + 128) w - 128 sum w = sum x w, exact (|values| < 2^21).
  static ireg isum(ireg acc, const std::int16_t* wsum) {
    const __m512i w =
        _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsum)));
    return _mm512_sub_epi32(acc, _mm512_slli_epi32(w, 7));
  }
  static freg fzero() { return _mm512_setzero_ps(); }
  static freg set1(float f) { return _mm512_set1_ps(f); }
  static freg loadf(const float* p) { return _mm512_loadu_ps(p); }
  // 16 binary16 bit patterns widened exactly.
  static freg loadh(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void storef(float* p, freg a) { _mm512_storeu_ps(p, a); }
  static freg cvt(ireg a) { return _mm512_cvtepi32_ps(a); }
  static freg add(freg a, freg b) { return _mm512_add_ps(a, b); }
  static freg mul(freg a, freg b) { return _mm512_mul_ps(a, b); }
  static freg sub(freg a, freg b) { return _mm512_sub_ps(a, b); }
  // 16 int16 sign-extended to the lanes (sm, mm: sbyte<0> and sbyte<1> read their bytes).
  static ireg loadi16(const std::int16_t* p) {
    return _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static ireg set1i(std::int32_t v) { return _mm512_set1_epi32(v); }
  static ireg addi(ireg a, ireg b) { return _mm512_add_epi32(a, b); }
  static ireg mullo(ireg a, ireg b) { return _mm512_mullo_epi32(a, b); }
  // Byte J of each 32-bit lane, sign-extended (cpu::sm_byte).
  template <int J>
  static ireg sbyte(ireg v) {
    return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * J), 24);
  }
};
}  // namespace

QLinearFn qlinear_avx512(bool vnni) {
  return vnni ? qlinear_panels<DotVnni512> : qlinear_panels<Dot256>;
}

}  // namespace detinfer::kernels::cpu
