// Attention kernels written once over a vector type V (see simd_kernels.h for V's
// contract, plus V::transpose(reg r[L]): r[i] = row i of an L x L tile becomes column
// i). Included ONLY by the ISA translation units, inside their anonymous namespace, after
// simd_kernels.h; no include guard.
//
// The spec's attention (docs/numerics.md) is computed in two phases over 64-key chunks:
//   scores:   S[g][j] = dot(q_g, K[j], d) * scale with lanes over L consecutive KEYS (K
//             transposed L x L in registers or a scratch, or read from AttnHeads::kt where
//             a prefill's rows had it transposed once; each lane runs the reference's fma
//             chain over the columns), plus each head's NaN-ignoring max over the range;
//   partials: per chunk, e = exp(S - m) with lanes over keys, the chunk's denominator
//             partial (a plain in-order sum per head) and numerator partial (lanes over
//             head columns, fma chain over the chunk's keys in order): in
//             attention_partials_simd.h.
// The dispatcher (kernels/attention.cpp) folds the maxima and the chunk partials in the
// spec's order, so any split of the chunks over tasks gives the reference's bits.
//
// The K/V pools hold f32, or bf16 / f16 bit patterns (PagedKvView::kv_dtype): every load
// from them goes through KvLoad<D>, which widens exactly (bf16: shift left 16; f16: F16C),
// so the kernels compute on the same binary32 values whatever the storage.

constexpr int kMaxKeyBlocks = 8;  // key blocks of L keys transposed at a time

// Loads L (or the first n < L) K/V elements of storage type D as binary32 lanes.
template <core::DType D>
struct KvLoad {
  using T = float;
  static typename V::reg load(const T* p) { return V::load(p); }
  static typename V::reg load_n(const T* p, int n) { return V::load_n(p, n); }
};
template <core::DType D>
struct KvLoad16 {
  using T = std::uint16_t;
  static typename V::reg load(const T* p) {
    return D == core::DType::kBF16 ? V::load_bf16(p) : V::load_f16(p);
  }
  static typename V::reg load_n(const T* p, int n) {
    alignas(64) T tmp[V::L] = {};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return load(tmp);
  }
};
template <>
struct KvLoad<core::DType::kBF16> : KvLoad16<core::DType::kBF16> {};
template <>
struct KvLoad<core::DType::kF16> : KvLoad16<core::DType::kF16> {};

// K/V rows are scattered over cache blocks and strided by kv heads, so the hardware
// prefetcher sees many short streams; prefetch ahead explicitly (one line per 64 bytes),
// but only a little: rows prefetched further ahead into L1 evict each other (measured on
// 8192 cold keys, 1 thread: K 16 / V 32 keys ahead took 20-25% less time than 128 / 64).
constexpr std::int64_t kKeyPrefetch = 16;    // K rows this many keys ahead
constexpr std::int64_t kValuePrefetch = 32;  // V rows this many keys ahead
template <typename T>
inline void prefetch_row(const T* row, std::int64_t d) {
  for (std::int64_t c = 0; c < d; c += 64 / static_cast<std::int64_t>(sizeof(T)))
    _mm_prefetch(reinterpret_cast<const char*>(row + c), _MM_HINT_T0);
}

// Elements of a K or V row to prefetch from the kv head's start: the lines of the heads
// that the task runs next over the same keys as well (a.prefetch_heads), as long as they
// come to at most kMaxRowPrefetchBytes. Each head's pass over a range of keys (they take
// turns every 256 keys) otherwise waited on DRAM for its own part of the same token rows
// (0.5B shape, 2 kv heads of 64, cold KV at 8192-16384 keys: bf16 rows 12-27% less time,
// f32 rows 0-6%; prefetching the other heads' lines with prefetcht1 instead was 1.6x slower
// than the own head's lines alone).
// Measured only for rows of 256 (bf16) and 512 bytes (f32); larger rows keep to their own
// head.
constexpr std::int64_t kMaxRowPrefetchBytes = 512;
template <core::DType D>
inline std::int64_t prefetch_len(const AttnHeads& a) {
  const std::int64_t row = a.prefetch_heads * a.kv->head_dim;
  constexpr auto size = static_cast<std::int64_t>(sizeof(typename KvLoad<D>::T));
  return row * size <= kMaxRowPrefetchBytes ? row : a.kv->head_dim;
}

// Every load of a K or V row of the pool goes through these two (n >= L: a full vector;
// else the first n columns, the rest zero).
template <core::DType D>
inline typename V::reg load_k_cols(const typename KvLoad<D>::T* p, int n) {
  return n >= V::L ? KvLoad<D>::load(p) : KvLoad<D>::load_n(p, n);
}
template <core::DType D>
inline typename V::reg load_v_cols(const typename KvLoad<D>::T* p, int n) {
  return n >= V::L ? KvLoad<D>::load(p) : KvLoad<D>::load_n(p, n);
}

// r[c] = column c0 + c of the L full K rows (lane i = rows[i][c0 + c], widened): the K
// tile loads of score_block (f32 and bf16 pools, ISAs with register tiles).
// (W: V, a template parameter so that an ISA without bf16 tiles never names them.)
template <core::DType D, typename W = V>
[[gnu::always_inline]] inline void load_k_tile(const typename KvLoad<D>::T* const* rows,
                                               std::int64_t c0, typename W::reg* r) {
  if constexpr (D == core::DType::kBF16) {
    W::load_transpose_bf16(rows, c0, r);
  } else {
    W::load_transpose(rows, c0, r);
  }
}

// Transposes columns [c0, c0 + L) of L full K rows into KT[(c0 + c) * L + i].
template <core::DType D>
inline void transpose_full(const typename KvLoad<D>::T* const* rows, std::int64_t c0, float* KT) {
  typename V::reg r[V::L];
#pragma GCC unroll 16
  for (int i = 0; i < V::L; ++i) r[i] = load_k_cols<D>(rows[i] + c0, V::L);
  V::transpose(r);
#pragma GCC unroll 16
  for (int c = 0; c < V::L; ++c) V::store(KT + (c0 + c) * V::L, r[c]);
}

// Transposes the K rows of keys [j, j + n) (n <= L) into KT[c * L + i] (c < d, i < L;
// lanes i >= n are zero), widened from storage type D.
template <core::DType D>
inline void transpose_keys(const typename KvLoad<D>::T* kbase, const std::int64_t* off,
                           std::int64_t j, int n, std::int64_t d, float* KT) {
  const typename KvLoad<D>::T* rows[V::L];
#pragma GCC unroll 16
  for (int i = 0; i < V::L; ++i) rows[i] = kbase + off[j + (i < n ? i : 0)];
  std::int64_t c0 = 0;
  if (n == V::L)  // the common case: full rows, no masks
    for (; c0 + V::L <= d; c0 += V::L) transpose_full<D>(rows, c0, KT);
  for (; c0 < d; c0 += V::L) {
    const int cols = static_cast<int>(d - c0 < V::L ? d - c0 : V::L);
    typename V::reg r[V::L];
#pragma GCC unroll 16
    for (int i = 0; i < V::L; ++i) r[i] = i >= n ? V::zero() : load_k_cols<D>(rows[i] + c0, cols);
    V::transpose(r);
#pragma GCC unroll 16
    for (int c = 0; c < V::L; ++c)
      if (c < cols) V::store(KT + (c0 + c) * V::L, r[c]);
  }
}

// Where a score tile's results go: S (head g's scores at S + g * lds), the running
// NaN-ignoring maxima, lane-wise (head g's L lanes at mxv + g * L), and how many lanes
// of the tile's last key block are keys (L when it is full).
struct ScoreOut {
  float* S;
  std::int64_t lds;
  float scale;
  float* mxv;
  int last_n;
};

// HG heads x KB key blocks (KB * L keys): S[g * lds + b * L + i] = the score, chunked
// over d like ref::dot (p: fma chain over a 64-column chunk, s = s + p from +0, s kept in
// S between chunks), times scale after the last chunk; the scaled scores of the keys
// enter the lane-wise maxima. KT holds the transposed blocks, block b at KT + b*d*L.
template <int HG, int KB>
void score_tile(const float* q, std::int64_t d, const float* KT, const ScoreOut& o) {
  typename V::reg p[HG][KB];
  for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < d ? c0 + kChunk : d;
    zero_tile(p);
    for (std::int64_t c = c0; c < c1; ++c) {
      typename V::reg kv[KB];
#pragma GCC unroll 8
      for (int b = 0; b < KB; ++b) kv[b] = V::load(KT + (b * d + c) * V::L);
      fma_tile(p, q + c, d, kv);
    }
    const bool last = c1 == d;
#pragma GCC unroll 8
    for (int g = 0; g < HG; ++g) {
      typename V::reg m = last ? V::load(o.mxv + g * V::L) : V::zero();
#pragma GCC unroll 8
      for (int b = 0; b < KB; ++b) {
        float* sp = o.S + g * o.lds + b * V::L;
        typename V::reg s = V::add(c0 == 0 ? V::zero() : V::load(sp), p[g][b]);
        if (last) {
          s = V::mul(s, V::set1(o.scale));
          if (b < KB - 1 || o.last_n == V::L) m = V::max_seq(m, s);
        }
        V::store(sp, s);
      }
      if (last) {
        float* mg = o.mxv + g * V::L;
        V::store(mg, m);
        const float* sp = o.S + g * o.lds + (KB - 1) * V::L;
        for (int i = 0; i < o.last_n && o.last_n < V::L; ++i) mg[i] = sp[i] > mg[i] ? sp[i] : mg[i];
      }
    }
  }
}

using ScoreTileFn = void (*)(const float*, std::int64_t, const float*, const ScoreOut&);

// score_tile<hg, 2^lg>.
template <int... H>
ScoreTileFn score_tile_fn(int hg, int lg, std::integer_sequence<int, H...>) {
  static constexpr ScoreTileFn fns[][4] = {{&score_tile<H + 1, 1>, &score_tile<H + 1, 2>,
                                            &score_tile<H + 1, 4>, &score_tile<H + 1, 8>}...};
  return fns[hg - 1][lg];
}

// log2 of the key blocks per tile for hg heads (about kScoreAccs accumulators in flight,
// at most `left` blocks).
inline int tile_log2(int hg, std::int64_t left) {
  int lg = 3;
  while (lg > 0 && ((hg << lg) > kScoreAccs || (std::int64_t{1} << lg) > left)) --lg;
  return lg;
}

// Balanced passes of at most kHeadsPerPass heads: the pass size.
inline int heads_per_pass(int G) {
  const int passes = (G + kHeadsPerPass - 1) / kHeadsPerPass;
  return (G + passes - 1) / passes;
}

// Scores of the full block of L keys at `rows` for HG heads (kRegScoreMinHeads <= HG <=
// kHeadsPerPass; d a multiple of L): each L-column tile of K is transposed in registers
// and consumed at once (p: fma chain over a 64-column chunk, s = s + p from +0, times
// scale after the last chunk), so no transposed copy goes through memory. The scaled
// scores enter the lane-wise maxima at mxv.
template <int HG, core::DType D>
void score_block(const float* q, std::int64_t d, const typename KvLoad<D>::T* const* rows, float* S,
                 std::int64_t lds, float scale, float* mxv) {
  typename V::reg p[HG];
  for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < d ? c0 + kChunk : d;
#pragma GCC unroll 8
    for (int g = 0; g < HG; ++g) p[g] = V::zero();
    for (std::int64_t ct = c0; ct < c1; ct += V::L) {
      typename V::reg r[V::L];
      load_k_tile<D>(rows, ct, r);
#pragma GCC unroll 16
      for (int c = 0; c < V::L; ++c)
#pragma GCC unroll 8
        for (int g = 0; g < HG; ++g) p[g] = V::fma(V::set1(q[g * d + ct + c]), r[c], p[g]);
    }
    const bool last = c1 == d;
#pragma GCC unroll 8
    for (int g = 0; g < HG; ++g) {
      float* sp = S + g * lds;
      typename V::reg s = V::add(c0 == 0 ? V::zero() : V::load(sp), p[g]);
      if (last) {
        s = V::mul(s, V::set1(scale));
        V::store(mxv + g * V::L, V::max_seq(V::load(mxv + g * V::L), s));
      }
      V::store(sp, s);
    }
  }
}

template <core::DType D>
using ScoreBlockFn = void (*)(const float*, std::int64_t, const typename KvLoad<D>::T* const*,
                              float*, std::int64_t, float, float*);

template <core::DType D, int... H>
ScoreBlockFn<D> score_block_fn(int hg, std::integer_sequence<int, H...>) {
  static constexpr ScoreBlockFn<D> fns[] = {&score_block<H + 1, D>...};
  return fns[hg - 1];
}

// Keys [j0, j1) through the scratch: up to kMaxKeyBlocks blocks of L keys transposed at a
// time into it, then score tiles over them (any head count, head_dim, key count, storage).
// With a.kt (j0 a multiple of L) the tiles read the blocks transposed beforehand there.
template <core::DType D>
void scores_via_scratch(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* S,
                        std::int64_t lds, float* mxv, float* scratch) {
  const std::int64_t d = a.kv->head_dim;
  const int G = static_cast<int>(a.group);
  const auto* kbase = static_cast<const typename KvLoad<D>::T*>(a.kv->k_pool) + a.kv_head * d;
  const int per = heads_per_pass(G);
  const auto heads = std::make_integer_sequence<int, kHeadsPerPass>();
  constexpr std::int64_t step = kMaxKeyBlocks * V::L;  // keys transposed at a time
  const std::int64_t pf = prefetch_len<D>(a);
  for (std::int64_t j = j0; j < j1; j += step) {
    const std::int64_t n = j1 - j < step ? j1 - j : step;
    const std::int64_t blocks = (n + V::L - 1) / V::L;
    const float* src = a.kt != nullptr ? a.kt + j * d : scratch;
    for (std::int64_t b = 0; b < blocks && a.kt == nullptr; ++b) {
      const std::int64_t jb = j + b * V::L;
      for (std::int64_t t = jb + kKeyPrefetch; t < jb + kKeyPrefetch + V::L && t < j1; ++t)
        prefetch_row(kbase + a.off[t], pf);
      const int nb = static_cast<int>(j1 - jb < V::L ? j1 - jb : V::L);
      transpose_keys<D>(kbase, a.off, jb, nb, d, scratch + b * d * V::L);
    }
    for (int g0 = 0; g0 < G; g0 += per) {
      const int hg = G - g0 < per ? G - g0 : per;
      for (std::int64_t b = 0; b < blocks;) {
        const int lg = tile_log2(hg, blocks - b);
        const std::int64_t end = j + (b + (std::int64_t{1} << lg)) * V::L;
        const int last_n = static_cast<int>(end <= j1 ? V::L : V::L - (end - j1));
        const ScoreOut o{S + g0 * lds + j + b * V::L, lds, a.scale, mxv + g0 * V::L, last_n};
        score_tile_fn(hg, lg, heads)(a.q + g0 * d, d, src + b * d * V::L, o);
        b += std::int64_t{1} << lg;
      }
    }
  }
}

// The full blocks of L keys from j0 on with score_block; returns where they end.
template <core::DType D>
std::int64_t scores_in_registers(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* S,
                                 std::int64_t lds, float* mxv) {
  const std::int64_t d = a.kv->head_dim;
  const int G = static_cast<int>(a.group);
  const auto* kbase = static_cast<const typename KvLoad<D>::T*>(a.kv->k_pool) + a.kv_head * d;
  const int per = heads_per_pass(G);
  const auto heads = std::make_integer_sequence<int, kHeadsPerPass>();
  const std::int64_t pf = prefetch_len<D>(a);
  std::int64_t j = j0;
  for (; j + V::L <= j1; j += V::L) {
    for (std::int64_t t = j + kKeyPrefetch; t < j + kKeyPrefetch + V::L && t < j1; ++t)
      prefetch_row(kbase + a.off[t], pf);
    const typename KvLoad<D>::T* rows[V::L];
#pragma GCC unroll 16
    for (int i = 0; i < V::L; ++i) rows[i] = kbase + a.off[j + i];
    for (int g0 = 0; g0 < G; g0 += per) {
      const int hg = G - g0 < per ? G - g0 : per;
      score_block_fn<D>(hg, heads)(a.q + g0 * d, d, rows, S + g0 * lds + j, lds, a.scale,
                                   mxv + g0 * V::L);
    }
  }
  return j;
}

// Register tiles for f32 and bf16 pools on ISAs that have them (f16 pools use the scratch
// path, which widens as it transposes).
template <core::DType D>
void attn_scores_t(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* S, std::int64_t lds,
                   float* mx, float* scratch) {
  const std::int64_t d = a.kv->head_dim;
  const int G = static_cast<int>(a.group);
  float* mxv = scratch + kMaxKeyBlocks * V::L * d;  // G lane-wise maxima
  for (int i = 0; i < G * V::L; ++i) mxv[i] = -__builtin_inff();
  std::int64_t j = j0;
  if (a.kt != nullptr && j0 % V::L == 0) {
    scores_via_scratch<D>(a, j0, j1, S, lds, mxv, scratch);
    j = j1;
  } else {
    AttnHeads own = a;  // transposes as it goes
    own.kt = nullptr;
    if constexpr ((D == core::DType::kF32 || D == core::DType::kBF16) &&
                  kRegScoreMinHeads <= kHeadsPerPass) {
      if (heads_per_pass(G) >= kRegScoreMinHeads && d % V::L == 0)
        j = scores_in_registers<D>(own, j0, j1, S, lds, mxv);
    }
    if (j < j1) scores_via_scratch<D>(own, j, j1, S, lds, mxv, scratch);
  }
  for (int g = 0; g < G; ++g) {  // NaN-ignoring: a NaN lane never wins
    float best = -__builtin_inff();
    for (int i = 0; i < V::L; ++i) best = mxv[g * V::L + i] > best ? mxv[g * V::L + i] : best;
    mx[g] = best;
  }
}

[[maybe_unused]] void attn_scores(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* S,
                                  std::int64_t lds, float* mx, float* scratch) {
  switch (a.kv->kv_dtype) {
    case core::DType::kBF16:
      return attn_scores_t<core::DType::kBF16>(a, j0, j1, S, lds, mx, scratch);
    case core::DType::kF16:
      return attn_scores_t<core::DType::kF16>(a, j0, j1, S, lds, mx, scratch);
    case core::DType::kF32:
      break;
  }
  attn_scores_t<core::DType::kF32>(a, j0, j1, S, lds, mx, scratch);
}

template <core::DType D>
void attn_transpose_k_t(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* kt) {
  const std::int64_t d = a.kv->head_dim;
  const auto* kbase = static_cast<const typename KvLoad<D>::T*>(a.kv->k_pool) + a.kv_head * d;
  for (std::int64_t j = j0; j < j1; j += V::L) {
    for (std::int64_t t = j + kKeyPrefetch; t < j + kKeyPrefetch + V::L && t < j1; ++t)
      prefetch_row(kbase + a.off[t], d);
    transpose_keys<D>(kbase, a.off, j, static_cast<int>(j1 - j < V::L ? j1 - j : V::L), d,
                      kt + j * d);
  }
}

[[maybe_unused]] void attn_transpose_k(const AttnHeads& a, std::int64_t j0, std::int64_t j1,
                                       float* kt) {
  switch (a.kv->kv_dtype) {
    case core::DType::kBF16:
      return attn_transpose_k_t<core::DType::kBF16>(a, j0, j1, kt);
    case core::DType::kF16:
      return attn_transpose_k_t<core::DType::kF16>(a, j0, j1, kt);
    case core::DType::kF32:
      break;
  }
  attn_transpose_k_t<core::DType::kF32>(a, j0, j1, kt);
}
