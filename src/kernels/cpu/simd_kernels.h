// SIMD kernels written once over a vector type V; included ONLY by the ISA translation
// units (avx2.cpp, avx512.cpp), inside an anonymous namespace, after they define V:
//
//   struct V {
//     using reg = ...;  static constexpr int L = lanes;
//     zero(), set1(f), load(p), store(p, a), load_n(p, n), store_n(p, a, n),
//     add, sub, mul, div, fma(a, b, c) = a*b + c rounded once,
//     load_bf16(p), load_f16(p) (L values widened exactly),
//     fnma(a, b, c) = -(a*b) + c rounded once (= fma(-a, b, c)),
//     max_seq(m, x) = x > m ? x : m lane-wise,
//     scale_pow2(y, kf) = (y * 2^(k>>1)) * 2^(k - (k>>1)) for integral kf = k,
//     exp_special(y, x): y, except 0 where x < kExpLo, inf where x > kExpHi, x+x for NaN.
//   };
// and the tile shapes: linear kMaxRows rows x kTileVecs vectors; attention values
// kHeadsPerPass heads x kValueVecs vectors (HG*CB accumulators must fit the registers).
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

// --- linear ------------------------------------------------------------------------

#include "kernels/cpu/simd_linear.h"

// --- attention ---------------------------------------------------------------------
//
// For a group of G <= V::L query heads sharing one kv head, lanes run over heads:
//   scores S[j] (one vector per key, lane g = head g): chunked fma over c of
//   q_g[c] * k_j[c], times scale; then lane-wise max, exp, chunked sum over j (den).
// The numerator runs lanes over columns c: for each head, chunked fma over j of
// e_g[j] * v_j[c]. Every lane follows the reference's order exactly.

// K/V rows are scattered over cache blocks and strided by kv heads, so the hardware
// prefetcher sees many short streams; prefetch a few keys ahead explicitly.
constexpr int kKeysPerBlock = 8;
constexpr std::int64_t kPrefetchBlocks = 3;  // score blocks ahead

inline void prefetch_row(const float* row, std::int64_t d) {
  for (std::int64_t c = 0; c < d; c += 16)
    _mm_prefetch(reinterpret_cast<const char*>(row + c), _MM_HINT_T0);
}

// Scores of KB keys starting at j (all heads at once) into S[j..j+KB).
template <int KB>
void score_keys(const float* qT, std::int64_t d, const float* const* krow, float scale, float* S) {
  typename V::reg s[KB], p[KB];
#pragma GCC unroll 8
  for (int b = 0; b < KB; ++b) s[b] = V::zero();
  for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < d ? c0 + kChunk : d;
#pragma GCC unroll 8
    for (int b = 0; b < KB; ++b) p[b] = V::zero();
    for (std::int64_t c = c0; c < c1; ++c) {
      const typename V::reg qv = V::load(qT + c * V::L);
#pragma GCC unroll 8
      for (int b = 0; b < KB; ++b) p[b] = V::fma(qv, V::set1(krow[b][c]), p[b]);
    }
#pragma GCC unroll 8
    for (int b = 0; b < KB; ++b) s[b] = V::add(s[b], p[b]);
  }
  const typename V::reg sc = V::set1(scale);
#pragma GCC unroll 8
  for (int b = 0; b < KB; ++b) V::store(S + b * V::L, V::mul(s[b], sc));
}

// n >= L: a full vector; else the first n lanes.
inline typename V::reg load_cols(const float* p, int n) {
  return n >= V::L ? V::load(p) : V::load_n(p, n);
}
inline void store_cols(float* p, typename V::reg a, int n) {
  if (n >= V::L) {
    V::store(p, a);
  } else {
    V::store_n(p, a, n);
  }
}

// One chunk [j0, j1) of the numerator for HG heads over CB vectors of columns (CB*L
// columns from vbase's column; when CB == 1, `cols` may be < L): p = fma chain over the
// chunk's keys, then s = s + p, with s kept in `out` (s = +0 + p for the first chunk).
// E holds key j's weights of the heads at E[j * ES + g] (ES = the score kernel's lanes).
template <int HG, int CB, int ES>
void attend_chunk(const float* E, std::int64_t j0, std::int64_t j1, const float* vbase,
                  const std::int64_t* off, int cols, float* out, std::int64_t out_stride) {
  typename V::reg p[HG][CB];
#pragma GCC unroll 8
  for (int g = 0; g < HG; ++g)
#pragma GCC unroll 4
    for (int b = 0; b < CB; ++b) p[g][b] = V::zero();
  for (std::int64_t j = j0; j < j1; ++j) {
    const float* vr = vbase + off[j];
    typename V::reg vv[CB];
#pragma GCC unroll 4
    for (int b = 0; b < CB; ++b)
      vv[b] = CB == 1 && cols < V::L ? V::load_n(vr, cols) : V::load(vr + b * V::L);
#pragma GCC unroll 8
    for (int g = 0; g < HG; ++g) {
      const typename V::reg e = V::set1(E[j * ES + g]);
#pragma GCC unroll 4
      for (int b = 0; b < CB; ++b) p[g][b] = V::fma(e, vv[b], p[g][b]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < HG; ++g)
#pragma GCC unroll 4
    for (int b = 0; b < CB; ++b) {
      float* o = out + g * out_stride + b * V::L;
      const typename V::reg s0 = j0 == 0 ? V::zero() : load_cols(o, cols - b * V::L);
      store_cols(o, V::add(s0, p[g][b]), cols - b * V::L);
    }
}

using ChunkFn = void (*)(const float*, std::int64_t, std::int64_t, const float*,
                         const std::int64_t*, int, float*, std::int64_t);

template <int CB, int ES, int... H>
constexpr ChunkFn chunk_fn(int hg, std::integer_sequence<int, H...>) {
  constexpr ChunkFn fns[] = {&attend_chunk<H + 1, CB, ES>...};
  return fns[hg - 1];
}

// Numerator, chunk by chunk of 64 keys (the spec's chunks): within a chunk, columns in
// blocks of kValueVecs vectors and heads in balanced passes of at most kHeadsPerPass.
// A chunk's value rows (64 x head_dim floats) stay in L1 across the passes, and the
// next chunk's rows are prefetched meanwhile. Then out = s / den. The weights E come
// from a score kernel with ES lanes (E[j * ES + g]), which may be narrower than V.
template <int ES>
void attend_all(const float* S, int G, std::int64_t num_keys, const float* vbase,
                const std::int64_t* off, std::int64_t d, const float* dens, float* out) {
  const int passes = (G + kHeadsPerPass - 1) / kHeadsPerPass;
  const int per = (G + passes - 1) / passes;
  const auto heads = std::make_integer_sequence<int, kHeadsPerPass>();
  constexpr std::int64_t wide = kValueVecs * V::L;
  for (std::int64_t j0 = 0; j0 < num_keys; j0 += kChunk) {
    const std::int64_t j1 = j0 + kChunk < num_keys ? j0 + kChunk : num_keys;
    for (std::int64_t j = j1; j < j1 + kChunk && j < num_keys; ++j) prefetch_row(vbase + off[j], d);
    for (std::int64_t c = 0; c < d;) {
      const bool full = d - c >= wide;
      const int cols = static_cast<int>(full ? wide : (d - c < V::L ? d - c : V::L));
      for (int g0 = 0; g0 < G; g0 += per) {
        const int hg = G - g0 < per ? G - g0 : per;
        const ChunkFn fn = full ? chunk_fn<kValueVecs, ES>(hg, heads) : chunk_fn<1, ES>(hg, heads);
        fn(S + g0, j0, j1, vbase + c, off, cols, out + g0 * d + c, d);
      }
      c += cols;
    }
  }
  for (int g = 0; g < G; ++g) {
    const typename V::reg den = V::set1(dens[g]);
    for (std::int64_t c = 0; c < d; c += V::L) {
      const int n = static_cast<int>(d - c < V::L ? d - c : V::L);
      float* o = out + g * d + c;
      store_cols(o, V::div(load_cols(o, n), den), n);
    }
  }
}

// Scores, max, exp and the chunked denominators of up to V::L heads of one kv head
// group, one query row (num_keys > 0), lanes over heads. Returns E (exp weights, key j's
// at E[j * V::L + g], in scratch) and writes dens[0..V::L).
[[maybe_unused]] const float* score_softmax(const float* q, int G, std::int64_t num_keys,
                                            std::int64_t kv_head, const PagedKvView& kv,
                                            const std::int64_t* off, float scale, float* scratch,
                                            float* dens) {
  const std::int64_t d = kv.head_dim;
  const float* kbase = kv.k_pool + kv_head * d;
  float* qT = scratch;            // d * L
  float* S = scratch + d * V::L;  // num_keys * L (scores, then exp)
  for (std::int64_t c = 0; c < d; ++c)
    for (int g = 0; g < V::L; ++g) qT[c * V::L + g] = g < G ? q[g * d + c] : 0.0f;
  // Scores, kKeysPerBlock keys at a time: that many independent fma chains keep the
  // fma units busy despite their latency.
  std::int64_t j = 0;
  const float* krow[kKeysPerBlock];
  constexpr std::int64_t ahead = kKeysPerBlock * kPrefetchBlocks;
  for (; j + kKeysPerBlock <= num_keys; j += kKeysPerBlock) {
    for (int b = 0; b < kKeysPerBlock; ++b) krow[b] = kbase + off[j + b];
    if (j + ahead + kKeysPerBlock <= num_keys) {
      for (int b = 0; b < kKeysPerBlock; ++b) prefetch_row(kbase + off[j + ahead + b], d);
    }
    score_keys<kKeysPerBlock>(qT, d, krow, scale, S + j * V::L);
  }
  for (; j < num_keys; ++j) {
    krow[0] = kbase + off[j];
    score_keys<1>(qT, d, krow, scale, S + j * V::L);
  }
  // Max, exp, chunked sum: lane-wise over heads.
  typename V::reg m = V::load(S);
  for (std::int64_t i = 1; i < num_keys; ++i) m = V::max_seq(m, V::load(S + i * V::L));
  typename V::reg den = V::zero();
  for (std::int64_t j0 = 0; j0 < num_keys; j0 += kChunk) {
    const std::int64_t j1 = j0 + kChunk < num_keys ? j0 + kChunk : num_keys;
    typename V::reg p = V::zero();
    for (std::int64_t i = j0; i < j1; ++i) {
      const typename V::reg e = exp_lanes(V::sub(V::load(S + i * V::L), m));
      V::store(S + i * V::L, e);
      p = V::add(p, e);
    }
    den = V::add(den, p);
  }
  V::store(dens, den);
  return S;
}

// Up to V::L heads of one kv head group, one query row.
void attention_lanes(const float* q, int G, std::int64_t num_keys, std::int64_t kv_head,
                     const PagedKvView& kv, const std::int64_t* off, float scale, float* out,
                     float* scratch) {
  alignas(64) float dens[V::L];
  const float* E = score_softmax(q, G, num_keys, kv_head, kv, off, scale, scratch, dens);
  // Numerator: lanes over columns.
  attend_all<V::L>(E, G, num_keys, kv.v_pool + kv_head * kv.head_dim, off, kv.head_dim, dens, out);
}

[[maybe_unused]] void attention_simd(const float* q, std::int64_t group, std::int64_t num_keys,
                                     std::int64_t kv_head, const PagedKvView& kv,
                                     const std::int64_t* off, float scale, float* out,
                                     float* scratch) {
  const std::int64_t d = kv.head_dim;
  if (num_keys <= 0) {
    for (std::int64_t i = 0; i < group * d; ++i) out[i] = 0.0f;
    return;
  }
  for (std::int64_t g0 = 0; g0 < group; g0 += V::L) {
    const int G = static_cast<int>(group - g0 < V::L ? group - g0 : V::L);
    attention_lanes(q + g0 * d, G, num_keys, kv_head, kv, off, scale, out + g0 * d, scratch);
  }
}
