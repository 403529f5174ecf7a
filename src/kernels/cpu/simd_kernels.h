// SIMD kernels written once over a vector type V; included ONLY by the ISA translation
// units (avx2.cpp, avx512.cpp), inside an anonymous namespace, after they define V:
//
//   struct V {
//     using reg = ...;  static constexpr int L = lanes;
//     zero(), set1(f), load(p), store(p, a), load_n(p, n), store_n(p, a, n),
//     add, sub, mul, div, neg (the sign bit flipped), fma(a, b, c) = a*b + c rounded once,
//     load_bf16(p), load_f16(p) (L values widened exactly),
//     fnma(a, b, c) = -(a*b) + c rounded once (= fma(-a, b, c)),
//     max_seq(m, x) = x > m ? x : m lane-wise,
//     nan_bits(x), eq_bits(x, m): bit i set where lane i is NaN, where x == m (IEEE),
//     scale_pow2(y, kf) = (y * 2^(k>>1)) * 2^(k - (k>>1)) for integral kf = k,
//     exp_special(y, x): y, except 0 where x < kExpLo, inf where x > kExpHi, x+x for NaN.
//   };
// and the tile shapes: linear kMaxRows rows x kTileVecs vectors (attention: see
// attention_simd.h).
// It has no include guard: a TU may include it several times in different namespaces,
// each with its own V.
//
// Every output lane performs exactly the scalar reference's sequence of operations
// (kernels/reference/reference.cpp); lanes only ever run over independent outputs
// (columns of linear, heads or columns in attention), never over a reduction.

constexpr std::int64_t kChunk = ref::kChunk;

// --- exp ---------------------------------------------------------------------------

// Lane-wise exp_f32 (reference/exp_log.cpp): the same operations in the same order.
inline typename V::reg exp_lanes(typename V::reg x) {
  using namespace explog;
  const typename V::reg t = V::mul(x, V::set1(kLog2e));
  const typename V::reg kf = V::sub(V::add(t, V::set1(kRoundMagic)), V::set1(kRoundMagic));
  typename V::reg r = V::fnma(kf, V::set1(kExpLn2Hi), x);
  r = V::fnma(kf, V::set1(kExpLn2Lo), r);
  typename V::reg p = V::set1(kExpP0);
  p = V::fma(p, r, V::set1(kExpP1));
  p = V::fma(p, r, V::set1(kExpP2));
  p = V::fma(p, r, V::set1(kExpP3));
  p = V::fma(p, r, V::set1(kExpP4));
  p = V::fma(p, r, V::set1(kExpP5));
  const typename V::reg r2 = V::mul(r, r);
  typename V::reg y = V::fma(p, r2, r);
  y = V::add(y, V::set1(1.0f));
  y = V::scale_pow2(y, kf);
  return V::exp_special(y, x);
}

[[maybe_unused]] void exp_vec(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + V::L <= n; i += V::L) V::store(y + i, exp_lanes(V::load(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_n(y + i, exp_lanes(V::load_n(x + i, rest)), rest);
  }
}

[[maybe_unused]] void exp_sub_vec(const float* x, float m, float* y, std::int64_t n) {
  const typename V::reg mv = V::set1(m);
  std::int64_t i = 0;
  for (; i + V::L <= n; i += V::L) V::store(y + i, exp_lanes(V::sub(V::load(x + i), mv)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_n(y + i, exp_lanes(V::sub(V::load_n(x + i, rest), mv)), rest);
  }
}

[[maybe_unused]] void add_vec(const float* a, const float* b, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + V::L <= n; i += V::L) V::store(out + i, V::add(V::load(a + i), V::load(b + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_n(out + i, V::add(V::load_n(a + i, rest), V::load_n(b + i, rest)), rest);
  }
}

// --- silu_mul ----------------------------------------------------------------------

// ref::silu_mul lane-wise: g / (1 + exp_f32(-g)) * u, the reference's operations in its
// order (-g a sign flip, as in scalar code).
inline typename V::reg silu_mul_lanes(typename V::reg g, typename V::reg u) {
  return V::mul(V::div(g, V::add(V::set1(1.0f), exp_lanes(V::neg(g)))), u);
}

[[maybe_unused]] void silu_mul_vec(const float* g, const float* u, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + V::L <= n; i += V::L)
    V::store(out + i, silu_mul_lanes(V::load(g + i), V::load(u + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_n(out + i, silu_mul_lanes(V::load_n(g + i, rest), V::load_n(u + i, rest)), rest);
  }
}

// --- argmax, max_value -------------------------------------------------------------

// The lane-wise maxima mv folded in lane order (x > m ? x : m), then x[full, n) in order:
// the second half of argmax_vec's and max_value_vec's passes.
inline float fold_max(typename V::reg mv, const float* x, std::int64_t full, std::int64_t n) {
  alignas(64) float lanes[V::L];
  V::store(lanes, mv);
  float m = lanes[0];
  for (int l = 1; l < V::L; ++l) m = lanes[l] > m ? lanes[l] : m;
  for (std::int64_t i = full; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// ref::argmax (the lowest index of the largest value; a NaN is an error) in two passes:
// the largest value m (lane-wise x > m ? x : m; the lanes' order only decides which of
// -0 and +0 is kept, and they compare equal), then the first index with x[i] == m, which
// is the first index the reference's `x[i] > x[best]` ends on. A NaN anywhere: the
// reference, which names its index.
[[maybe_unused]] std::int64_t argmax_vec(const float* x, std::int64_t n) {
  const std::int64_t full = n > 0 ? n / V::L * V::L : 0;
  if (full == 0) return ref::argmax(x, n);
  typename V::reg mv = V::load(x);
  unsigned nan = V::nan_bits(mv);
  for (std::int64_t i = V::L; i < full; i += V::L) {
    const typename V::reg v = V::load(x + i);
    nan |= V::nan_bits(v);
    mv = V::max_seq(mv, v);
  }
  const float m = fold_max(mv, x, full, n);
  for (std::int64_t i = full; i < n; ++i) nan |= x[i] != x[i] ? 1u : 0u;
  if (nan != 0) return ref::argmax(x, n);
  const typename V::reg mb = V::set1(m);
  for (std::int64_t i = 0; i < full; i += V::L)
    if (const unsigned eq = V::eq_bits(V::load(x + i), mb); eq != 0) return i + __builtin_ctz(eq);
  for (std::int64_t i = full; i < n; ++i)
    if (x[i] == m) return i;
  return ref::argmax(x, n);  // unreachable: m is one of the values
}

// ref::max_value with lanes: every lane starts at x[0] and keeps x > m ? x : m (a NaN
// never wins), then the lanes fold the same way. Only the choice between -0 and +0
// depends on the order, so a zero result is the reference's; x[0] NaN is returned as is.
[[maybe_unused]] float max_value_vec(const float* x, std::int64_t n) {
  if (n < 2 * V::L || x[0] != x[0]) return ref::max_value(x, n);
  const std::int64_t full = n / V::L * V::L;
  typename V::reg mv = V::set1(x[0]);
  for (std::int64_t i = 0; i < full; i += V::L) mv = V::max_seq(mv, V::load(x + i));
  const float m = fold_max(mv, x, full, n);
  return m == 0.0f ? ref::max_value(x, n) : m;
}

// --- dot ---------------------------------------------------------------------------

// ref::dot with the fma instruction (__builtin_fmaf, not std::fma: an inline std
// function compiled here could be merged with a baseline copy) and four chunks in
// flight; the chunk partials are independent and folded in chunk order.
[[maybe_unused]] float dot_fma(const float* a, const float* b, std::int64_t k) {
  float s = 0.0f;
  const std::int64_t full = k / kChunk;
  std::int64_t c = 0;
  for (; c + 4 <= full; c += 4) {
    const float* a0 = a + c * kChunk;
    const float* b0 = b + c * kChunk;
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    for (std::int64_t i = 0; i < kChunk; ++i) {
      p0 = __builtin_fmaf(a0[i], b0[i], p0);
      p1 = __builtin_fmaf(a0[kChunk + i], b0[kChunk + i], p1);
      p2 = __builtin_fmaf(a0[2 * kChunk + i], b0[2 * kChunk + i], p2);
      p3 = __builtin_fmaf(a0[3 * kChunk + i], b0[3 * kChunk + i], p3);
    }
    s = s + p0;
    s = s + p1;
    s = s + p2;
    s = s + p3;
  }
  for (std::int64_t c0 = c * kChunk; c0 < k; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < k ? c0 + kChunk : k;
    float p = 0.0f;
    for (std::int64_t i = c0; i < c1; ++i) p = __builtin_fmaf(a[i], b[i], p);
    s = s + p;
  }
  return s;
}

// --- register tiles (linear and attention scores) ----------------------------------

// acc[r][c] = +0 for an R x C tile of vector accumulators.
template <int R, int C>
__attribute__((always_inline)) inline void zero_tile(typename V::reg (&acc)[R][C]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = V::zero();
}

// One step of every fma chain of the tile: acc[r][c] = fma(x[r * ldx], w[c], acc[r][c])
// (row r's scalar broadcast over the C vectors).
template <int R, int C>
__attribute__((always_inline)) inline void fma_tile(typename V::reg (&acc)[R][C], const float* x,
                                                    std::int64_t ldx,
                                                    const typename V::reg (&w)[C]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const typename V::reg xb = V::set1(x[r * ldx]);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = V::fma(xb, w[c], acc[r][c]);
  }
}

// --- linear ------------------------------------------------------------------------

#include "kernels/cpu/simd_linear.h"
