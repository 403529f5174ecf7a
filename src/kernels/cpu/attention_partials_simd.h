// Attention partials (the second phase of attention_simd.h's scheme): per 64-key chunk,
// e = exp(S - m) with lanes over keys, the chunk's denominator partial (a plain in-order
// sum per head) and numerator partial (lanes over head columns, fma chain over the
// chunk's keys in order). Included ONLY by the ISA translation units, inside their
// anonymous namespace, after attention_simd.h (KvLoad, prefetch_row, heads_per_pass); no
// include guard.
// e = exp(S - m[g]) of keys [j0, j1) for G heads, in place (lanes over keys).
inline void chunk_exp(float* S, std::int64_t lds, int G, const float* m, std::int64_t j0,
                      std::int64_t j1) {
  for (int g = 0; g < G; ++g) {
    float* s = S + g * lds;
    const typename V::reg mv = V::set1(m[g]);
    std::int64_t j = j0;
    for (; j + V::L <= j1; j += V::L) V::store(s + j, exp_lanes(V::sub(V::load(s + j), mv)));
    if (j < j1) {
      const int r = static_cast<int>(j1 - j);
      V::store_n(s + j, exp_lanes(V::sub(V::load_n(s + j, r), mv)), r);
    }
  }
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

// Where one chunk's partials go and what its first column pass also does.
struct ChunkOut {
  float* num;           // head g's columns at num + g * d
  float* den;           // head g's denominator partial at den[g]
  bool acc;             // add to num/den (else store)
  std::int64_t pf_end;  // the first pass prefetches key j + kValuePrefetch's V row while < pf_end
  std::int64_t d;
  std::int64_t pf_len;  // elements of a V row prefetched (prefetch_len)
};

// One chunk [j0, j1) of the numerator for HG heads over CB vectors of columns (CB*L
// columns from vbase's column col0; when CB == 1, `cols` may be < L): p = fma chain over
// the chunk's keys with weights E[g * lds + j]. FIRST (the pass over the first columns) also
// runs the denominator chain p = p + e[j] (all lanes equal) and prefetches.
template <int HG, int CB, bool FIRST, core::DType D>
void attend_chunk(const float* E, std::int64_t lds, std::int64_t j0, std::int64_t j1,
                  const void* vbase_any, const std::int64_t* off, int cols, const ChunkOut& o,
                  int g0, std::int64_t col0) {
  using Ld = KvLoad<D>;
  const auto* vbase = static_cast<const typename Ld::T*>(vbase_any);
  typename V::reg p[HG][CB], pd[FIRST ? HG : 1];
#pragma GCC unroll 8
  for (int g = 0; g < HG; ++g) {
    if constexpr (FIRST) pd[g] = V::zero();
#pragma GCC unroll 4
    for (int b = 0; b < CB; ++b) p[g][b] = V::zero();
  }
  for (std::int64_t j = j0; j < j1; ++j) {
    const typename Ld::T* vr = vbase + off[j];
    if constexpr (FIRST) {
      if (j + kValuePrefetch < o.pf_end) prefetch_row(vbase + off[j + kValuePrefetch], o.pf_len);
    }
    typename V::reg vv[CB];
#pragma GCC unroll 4
    for (int b = 0; b < CB; ++b) vv[b] = load_v_cols<D>(vr + b * V::L, CB == 1 ? cols : V::L);
#pragma GCC unroll 8
    for (int g = 0; g < HG; ++g) {
      const typename V::reg e = V::set1(E[g * lds + j]);
      if constexpr (FIRST) pd[g] = V::add(pd[g], e);
#pragma GCC unroll 4
      for (int b = 0; b < CB; ++b) p[g][b] = V::fma(e, vv[b], p[g][b]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < HG; ++g) {
    if constexpr (FIRST) {
      alignas(64) float lanes[V::L];
      V::store(lanes, pd[g]);
      float* dg = o.den + g0 + g;
      *dg = o.acc ? *dg + lanes[0] : lanes[0];
    }
#pragma GCC unroll 4
    for (int b = 0; b < CB; ++b) {
      float* out = o.num + (g0 + g) * o.d + col0 + b * V::L;
      const int n = cols - b * V::L;
      store_cols(out, o.acc ? V::add(load_cols(out, n), p[g][b]) : p[g][b], n);
    }
  }
}

using ChunkFn = void (*)(const float*, std::int64_t, std::int64_t, std::int64_t, const void*,
                         const std::int64_t*, int, const ChunkOut&, int, std::int64_t);

template <int CB, bool FIRST, core::DType D, int... H>
ChunkFn chunk_fn(int hg, std::integer_sequence<int, H...>) {
  static constexpr ChunkFn fns[] = {&attend_chunk<H + 1, CB, FIRST, D>...};
  return fns[hg - 1];
}

// The partials of chunk [j0, j1): columns in blocks of kValueVecs vectors, heads in
// balanced passes (the chunk's V rows stay in L1 across the passes).
template <core::DType D>
void chunk_num(const float* E, std::int64_t lds, int G, std::int64_t j0, std::int64_t j1,
               const typename KvLoad<D>::T* vbase, const std::int64_t* off, const ChunkOut& o) {
  const int per = heads_per_pass(G);
  const auto heads = std::make_integer_sequence<int, kHeadsPerPass>();
  constexpr std::int64_t wide = kValueVecs * V::L;
  const std::int64_t d = o.d;
  for (std::int64_t c = 0; c < d;) {
    const bool full = d - c >= wide;
    const int cols = static_cast<int>(full ? wide : (d - c < V::L ? d - c : V::L));
    for (int g0 = 0; g0 < G; g0 += per) {
      const int hg = G - g0 < per ? G - g0 : per;
      ChunkFn fn;
      if (c == 0) {
        fn = full ? chunk_fn<kValueVecs, true, D>(hg, heads) : chunk_fn<1, true, D>(hg, heads);
      } else {
        fn = full ? chunk_fn<kValueVecs, false, D>(hg, heads) : chunk_fn<1, false, D>(hg, heads);
      }
      fn(E + g0 * lds, lds, j0, j1, vbase + c, off, cols, o, g0, c);
    }
    c += cols;
  }
}

template <core::DType D>
void attn_partials_t(const AttnHeads& a, float* S, std::int64_t lds, const float* m,
                     std::int64_t j0, std::int64_t j1, float* den, std::int64_t den_stride,
                     float* num, std::int64_t num_stride) {
  const std::int64_t d = a.kv->head_dim;
  const int G = static_cast<int>(a.group);
  const auto* vbase = static_cast<const typename KvLoad<D>::T*>(a.kv->v_pool) + a.kv_head * d;
  const std::int64_t pf = prefetch_len<D>(a);
  for (std::int64_t j = j0; j < j0 + kValuePrefetch && j < j1; ++j)
    prefetch_row(vbase + a.off[j], pf);
  for (std::int64_t k0 = j0, i = 0; k0 < j1; k0 += kChunk, ++i) {
    const std::int64_t k1 = k0 + kChunk < j1 ? k0 + kChunk : j1;
    chunk_exp(S, lds, G, m, k0, k1);
    const ChunkOut o{num + i * num_stride, den + i * den_stride, den_stride == 0, j1, d, pf};
    chunk_num<D>(S, lds, G, k0, k1, vbase, a.off, o);
  }
}

[[maybe_unused]] void attn_partials(const AttnHeads& a, float* S, std::int64_t lds, const float* m,
                                    std::int64_t j0, std::int64_t j1, float* den,
                                    std::int64_t den_stride, float* num, std::int64_t num_stride) {
  switch (a.kv->kv_dtype) {
    case core::DType::kBF16:
      return attn_partials_t<core::DType::kBF16>(a, S, lds, m, j0, j1, den, den_stride, num,
                                                 num_stride);
    case core::DType::kF16:
      return attn_partials_t<core::DType::kF16>(a, S, lds, m, j0, j1, den, den_stride, num,
                                                num_stride);
    case core::DType::kF32:
      break;
  }
  attn_partials_t<core::DType::kF32>(a, S, lds, m, j0, j1, den, den_stride, num, num_stride);
}
