// The quantized panel kernel over 256-bit integer vectors, written once for a block-dot
// policy D (D::dot(w, x): 8 int32 partial sums of the 32 products w[i] * x[i], exact).
// Included ONLY by qlinear_avx2.cpp and qlinear_avx512.cpp inside an anonymous namespace;
// no include guard.
//
// Lanes run over 8 columns of a panel, never over a reduction: each lane performs the
// reference's sequence (ref::quant_linear) for its column: isum (exact, any order), then
// v = (dw * dx) * float(isum), s = s + v over the blocks in order from +0, then s + bias.

// Sums each of 8 vectors of 8 int32 (exact): lane c of the result is the total of p[c].
inline __m256i total8(const __m256i p[8]) {
  const __m256i a01 = _mm256_hadd_epi32(p[0], p[1]), a23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i a45 = _mm256_hadd_epi32(p[4], p[5]), a67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i b = _mm256_hadd_epi32(a01, a23), c = _mm256_hadd_epi32(a45, a67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b, c, 0x20),
                          _mm256_permute2x128_si256(b, c, 0x31));
}

constexpr std::int64_t kQB = 32;  // ref::kQuantBlock
constexpr std::int64_t kGroup = 8;

// Columns [g*8, g*8 + 8) of panel p, rows [0, m): sums into out (row stride ldo, 8 lanes).
template <class D>
void qgroup(const QuantPacked& w, const std::int8_t* xq, const float* xd, std::int64_t m,
            std::int64_t p, std::int64_t g, float* out, std::int64_t ldo, const float* bias8) {
  for (std::int64_t r = 0; r < m; ++r) {
    __m256 s = _mm256_setzero_ps();
    const std::int8_t* xr = xq + r * w.k;
    const float* dr = xd + r * w.nb;
    for (std::int64_t b = 0; b < w.nb; ++b) {
      const std::int64_t blk = (p * w.nb + b) * kPanel + g * kGroup;
      const std::int8_t* wb = w.qs + blk * kQB;
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + b * kQB));
      __m256i part[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + c * kQB));
        part[c] = D::dot(wv, x);
      }
      const __m256 isum = _mm256_cvtepi32_ps(total8(part));
      const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(w.d + blk), _mm256_set1_ps(dr[b]));
      s = _mm256_add_ps(s, _mm256_mul_ps(scale, isum));
    }
    if (bias8 != nullptr) s = _mm256_add_ps(s, _mm256_loadu_ps(bias8));
    _mm256_storeu_ps(out + r * ldo, s);
  }
}

template <class D>
void qlinear_panels(const QuantPacked& w, const std::int8_t* xq, const float* xd, std::int64_t m,
                    float* y, std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  std::vector<float> tmp;
  for (std::int64_t p = p0; p < p1; ++p) {
    for (std::int64_t g = 0; g < kPanel / kGroup; ++g) {
      const std::int64_t col0 = p * kPanel + g * kGroup;
      if (col0 >= w.n) break;
      const std::int64_t cols = w.n - col0 < kGroup ? w.n - col0 : kGroup;
      if (cols == kGroup) {
        qgroup<D>(w, xq, xd, m, p, g, y + col0, ldy, w.bias != nullptr ? w.bias + col0 : nullptr);
        continue;
      }
      // A partial last group: through a scratch of m x 8 (padding columns compute zeros).
      float bias8[kGroup] = {};
      for (std::int64_t c = 0; c < cols && w.bias != nullptr; ++c) bias8[c] = w.bias[col0 + c];
      tmp.assign(static_cast<std::size_t>(m * kGroup), 0.0f);
      qgroup<D>(w, xq, xd, m, p, g, tmp.data(), kGroup, w.bias != nullptr ? bias8 : nullptr);
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < cols; ++c) y[r * ldy + col0 + c] = tmp[r * kGroup + c];
    }
  }
}

// AVX2 block dot: |w| (unsigned) times x with w's sign, pairs summed in int16 (at most
// 2 * 128 * 127 = 32512: no saturation), then pairs of those in int32.
struct DotMaddubs {
  static __m256i dot(__m256i w, __m256i x) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  }
};
