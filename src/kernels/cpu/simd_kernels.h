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

template <DType DT>
inline typename V::reg load_w(const void* base, std::int64_t index) {
  if constexpr (DT == DType::kF32) {
    return V::load(static_cast<const float*>(base) + index);
  } else if constexpr (DT == DType::kBF16) {
    return V::load_bf16(static_cast<const std::uint16_t*>(base) + index);
  } else {
    return V::load_f16(static_cast<const std::uint16_t*>(base) + index);
  }
}

constexpr std::int64_t elem_size(DType dt) { return dt == DType::kF32 ? 4 : 2; }

// One tile: MR rows x NV vectors (NV*L consecutive columns of one panel) into y (row
// stride ldy). w points to the tile's first column in the panel (row stride kPanel).
// For each output lane: p = fma chain over a chunk of 64 k, then s = s + p (s from +0,
// kept in y between chunks), then + bias.
template <int MR, int NV, DType DT>
void linear_tile(const void* w, std::int64_t k, const float* x, std::int64_t ldx, float* y,
                 std::int64_t ldy, const float* bias) {
  typename V::reg acc[MR][NV];
  for (std::int64_t c0 = 0; c0 < k; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < k ? c0 + kChunk : k;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
    for (std::int64_t i = c0; i < c1; ++i) {
      typename V::reg wv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) wv[v] = load_w<DT>(w, i * kPanel + v * V::L);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const typename V::reg xb = V::set1(x[r * ldx + i]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(xb, wv[v], acc[r][v]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        float* yp = y + r * ldy + v * V::L;
        const typename V::reg s = c0 == 0 ? V::zero() : V::load(yp);
        V::store(yp, V::add(s, acc[r][v]));
      }
  }
  if (bias != nullptr) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        float* yp = y + r * ldy + v * V::L;
        V::store(yp, V::add(V::load(yp), V::load(bias + v * V::L)));
      }
  }
}

using TileFn = void (*)(const void*, std::int64_t, const float*, std::int64_t, float*, std::int64_t,
                        const float*);

template <DType DT, int... R>
TileFn pick_tile(int mr, std::integer_sequence<int, R...>) {
  constexpr TileFn fns[] = {&linear_tile<R + 1, kTileVecs, DT>...};
  return fns[mr - 1];
}

constexpr std::int64_t kTileCols = kTileVecs * V::L;
static_assert(kPanel % kTileCols == 0, "a tile must not straddle panels");

template <DType DT>
void linear_dt(const PackedWeights& w, const float* x, std::int64_t ldx, std::int64_t m, float* y,
               std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  alignas(64) float tmp[kMaxRows * kTileCols];
  alignas(64) float tmp_bias[kTileCols];
  const auto rows_seq = std::make_integer_sequence<int, kMaxRows>();
  for (std::int64_t p = p0; p < p1; ++p) {
    const auto* panel = static_cast<const std::uint8_t*>(w.data) + p * w.k * kPanel * elem_size(DT);
    for (std::int64_t cs = 0; cs < kPanel; cs += kTileCols) {
      const std::int64_t col0 = p * kPanel + cs;
      if (col0 >= w.n) break;
      const std::int64_t cols = w.n - col0 < kTileCols ? w.n - col0 : kTileCols;
      const bool full = cols == kTileCols;
      const void* wt = panel + cs * elem_size(DT);
      const float* bias = nullptr;
      if (w.bias != nullptr) {
        if (full) {
          bias = w.bias + col0;
        } else {
          for (std::int64_t c = 0; c < kTileCols; ++c)
            tmp_bias[c] = c < cols ? w.bias[col0 + c] : 0.0f;
          bias = tmp_bias;
        }
      }
      for (std::int64_t r = 0; r < m; r += kMaxRows) {
        const int mr = static_cast<int>(m - r < kMaxRows ? m - r : kMaxRows);
        const TileFn fn = pick_tile<DT>(mr, rows_seq);
        if (full) {
          fn(wt, w.k, x + r * ldx, ldx, y + r * ldy + col0, ldy, bias);
        } else {
          fn(wt, w.k, x + r * ldx, ldx, tmp, kTileCols, bias);
          for (int i = 0; i < mr; ++i)
            for (std::int64_t c = 0; c < cols; ++c)
              y[(r + i) * ldy + col0 + c] = tmp[i * kTileCols + c];
        }
      }
    }
  }
}

[[maybe_unused]] void linear_simd(const PackedWeights& w, const float* x, std::int64_t ldx,
                                  std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0,
                                  std::int64_t p1) {
  switch (w.dtype) {
    case DType::kF32:
      linear_dt<DType::kF32>(w, x, ldx, m, y, ldy, p0, p1);
      break;
    case DType::kBF16:
      linear_dt<DType::kBF16>(w, x, ldx, m, y, ldy, p0, p1);
      break;
    case DType::kF16:
      linear_dt<DType::kF16>(w, x, ldx, m, y, ldy, p0, p1);
      break;
  }
}
