// The AVX2 block-dot policy of the quantized panel kernel (qlinear_simd.h's D), also the
// AVX-512 translation unit's policy on CPUs without VNNI. Included ONLY by
// qlinear_avx2.cpp and qlinear_avx512.cpp inside their anonymous namespace, after
// qlinear_simd.h; no include guard.

// 8 lanes over 256-bit vectors (AVX2 instructions): |w| (unsigned) times x with w's sign,
// pairs summed in int16 (at most 2 * 128 * 127 = 32512: no saturation), then in int32.
struct Dot256 {
  using ireg = __m256i;
  using freg = __m256;
  static constexpr int L = 8;
  static constexpr bool kShifted = false;
  static constexpr int kRowCols = 1;  // vectors per tile of kMaxQRows rows (16 registers)
  // Up to kStreamRows rows, the nibble form takes 2 vectors (one 16-column group, one
  // stream) where the int8 form takes 4. Measured on Zen 3 (bench_quant BM_QuantFormatVsQ8,
  // one thread, weights from memory; docs/performance.md, session 34): q4_0 / q5_0 / q4_k /
  // q6_k 5-11% less time at M 1 and 5-17% at M 2 than with 4, though ~10% more with the
  // weights in cache (BM_QuantFormatVsQ8Resident), which a decode step never has; q8_0 with
  // 2 lost up to 18% at K 4864. Not measured on AVX-512 CPUs without VNNI (this policy too).
  static constexpr int kNibbleStreamCols = 2;
  static ireg izero() { return _mm256_setzero_si256(); }
  static ireg load(const std::int8_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }
  static ireg dot(ireg acc, ireg w, std::int32_t x4) {
    const __m256i p16 =
        _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(_mm256_set1_epi32(x4), w));
    __m256i sum = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
    // Keeps acc one chain in a register: GCC otherwise regrouped the int32 adds of a block's
    // 8 x R products into a tree and spilled them (the 4 x 1 tile ~8% slower at M >= 64).
    asm("" : "+x"(sum));
    return sum;
  }
  // The nibble form's products in int16 (qblock_dots sums kT16 t's of them before one
  // widening): u times x, pairs summed (|p| <= 2 * 63 * 128); their sum; its int32 widening
  // (pairs of int16 summed) added to acc.
  static constexpr bool kSum16 = true;
  static ireg prod16(ireg u, std::int32_t x4) {
    return _mm256_maddubs_epi16(u, _mm256_set1_epi32(x4));
  }
  static ireg add16(ireg a, ireg b) { return _mm256_add_epi16(a, b); }
  static ireg widen16(ireg acc, ireg p16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
  // The low and high nibbles of 32 bytes, each as a byte.
  static void nibbles(const std::int8_t* p, ireg& lo, ireg& hi) {
    const __m256i v = load(p), mask = _mm256_set1_epi8(0x0F);
    lo = _mm256_and_si256(v, mask);
    hi = _mm256_and_si256(_mm256_srli_epi32(v, 4), mask);
  }
  static ireg shl(ireg v, int n) { return _mm256_slli_epi32(v, n); }
  static ireg shr(ireg v, int n) { return _mm256_srli_epi32(v, n); }
  static ireg and8(ireg v, int byte) {
    return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(byte)));
  }
  static ireg or8(ireg a, ireg b) { return _mm256_or_si256(a, b); }
  // a | (b & byte) in every byte.
  static ireg or_and8(ireg a, ireg b, int byte) { return or8(a, and8(b, byte)); }
  static ireg isum(ireg acc, const std::int16_t*) { return acc; }
  static freg fzero() { return _mm256_setzero_ps(); }
  static freg set1(float f) { return _mm256_set1_ps(f); }
  static freg loadf(const float* p) { return _mm256_loadu_ps(p); }
  // 8 binary16 bit patterns widened exactly.
  static freg loadh(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void storef(float* p, freg a) { _mm256_storeu_ps(p, a); }
  static freg cvt(ireg a) { return _mm256_cvtepi32_ps(a); }
  static freg add(freg a, freg b) { return _mm256_add_ps(a, b); }
  static freg mul(freg a, freg b) { return _mm256_mul_ps(a, b); }
  static freg sub(freg a, freg b) { return _mm256_sub_ps(a, b); }
  // 8 int16 sign-extended to the lanes (sm, mm: sbyte<0> and sbyte<1> read their bytes).
  static ireg loadi16(const std::int16_t* p) {
    return _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static ireg set1i(std::int32_t v) { return _mm256_set1_epi32(v); }
  static ireg addi(ireg a, ireg b) { return _mm256_add_epi32(a, b); }
  static ireg mullo(ireg a, ireg b) { return _mm256_mullo_epi32(a, b); }
  // Byte J of each 32-bit lane, sign-extended (cpu::sm_byte).
  template <int J>
  static ireg sbyte(ireg v) {
    return _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * J), 24);
  }
};
