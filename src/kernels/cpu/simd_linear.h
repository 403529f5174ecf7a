// The packed linear kernel over a vector type V, for M = 1..any rows. Included ONLY by
// simd_kernels.h (inside an ISA translation unit's anonymous namespace, after V,
// kMaxRows and kTileVecs are defined); no include guard, like simd_kernels.h.
//
// Every output lane y[r][j] performs exactly the reference's sequence: p = fma chain over
// a chunk of 64 k in k order (from +0), s = s + p over the chunks in order (s from +0),
// then s + bias. Lanes run over columns only; rows and column panels are independent.
//
// Register blocking: a tile is MR rows x NV vectors (MR*NV accumulators); each weight
// vector is loaded (and widened from bf16/f16) once per k and applied to MR rows. For
// M > 1 a panel's weights are walked in 32 KiB blocks (block_k): every row tile of the
// batch runs over a block while it is in L1/L2 (its partial sums s wait in y between
// chunks, as for M = 1), and the next block is prefetched in slices spread over those
// tiles, so DRAM is read while the fma units work instead of in stalls at each tile's
// first pass. Greedy row tiles: kMaxRows rows each, the last shorter.

template <core::DType DT>
inline typename V::reg load_w(const void* base, std::int64_t index) {
  if constexpr (DT == core::DType::kF32) {
    return V::load(static_cast<const float*>(base) + index);
  } else if constexpr (DT == core::DType::kBF16) {
    return V::load_bf16(static_cast<const std::uint16_t*>(base) + index);
  } else {
    return V::load_f16(static_cast<const std::uint16_t*>(base) + index);
  }
}

constexpr std::int64_t elem_size(core::DType dt) { return dt == core::DType::kF32 ? 4 : 2; }

// k per weight block when M > 1: 32 KiB of a panel (256 k of bf16/f16, 128 k of f32),
// a multiple of kChunk. Measured: 256 k of f32 was slower than 128 for M = 32..64.
template <core::DType DT>
constexpr std::int64_t block_k() {
  return 32768 / (kPanel * elem_size(DT));
}
static_assert(block_k<core::DType::kF32>() % kChunk == 0 &&
              block_k<core::DType::kBF16>() % kChunk == 0);

// Software prefetch of the packed k-rows base[0 .. count) (kPanel weights each,
// `stride` bytes apart): the tile's step s (k = cb + s) prefetches row s when
// s % every == phase, so the `every` tiles of a block share the rows evenly over their
// whole run (measured 11% faster at M = 16 than each tile prefetching its rows first).
struct RowPrefetch {
  const char* base = nullptr;
  std::int64_t stride = 0;
  std::int64_t count = 0;
  std::int64_t every = 1, phase = 0;
};

// One tile over chunks [cb, ce) (cb a multiple of kChunk; ce a multiple of kChunk or
// k): MR rows x NV vectors (NV*L consecutive columns of one panel) into y (row stride
// ldy). w points to the tile's first column in the panel (row stride kPanel). bias is
// added when ce == k (null: none).
template <int MR, int NV, core::DType DT>
void linear_tile(const void* w, std::int64_t cb, std::int64_t ce, std::int64_t k, const float* x,
                 std::int64_t ldx, float* y, std::int64_t ldy, const float* bias,
                 const RowPrefetch& pf) {
  typename V::reg acc[MR][NV];
  std::int64_t next_pf = pf.phase;  // the next step that prefetches
  for (std::int64_t c0 = cb; c0 < ce; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < ce ? c0 + kChunk : ce;
    zero_tile(acc);
    for (std::int64_t i = c0; i < c1; ++i) {
      // Written inline: GCC drops a call to a function that only prefetches.
      if (i - cb == next_pf && next_pf < pf.count) {
        const char* row = pf.base + next_pf * pf.stride;
        for (std::int64_t b = 0; b < kPanel * elem_size(DT); b += 64)
          _mm_prefetch(row + b, _MM_HINT_T0);
        next_pf += pf.every;
      }
      typename V::reg wv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) wv[v] = load_w<DT>(w, i * kPanel + v * V::L);
      fma_tile(acc, x + i, ldx, wv);
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
  if (bias != nullptr && ce == k) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        float* yp = y + r * ldy + v * V::L;
        V::store(yp, V::add(V::load(yp), V::load(bias + v * V::L)));
      }
  }
}

using TileFn = void (*)(const void*, std::int64_t, std::int64_t, std::int64_t, const float*,
                        std::int64_t, float*, std::int64_t, const float*, const RowPrefetch&);

template <core::DType DT, int... R>
TileFn pick_tile(int mr, std::integer_sequence<int, R...>) {
  constexpr TileFn fns[] = {&linear_tile<R + 1, kTileVecs, DT>...};
  return fns[mr - 1];
}

constexpr std::int64_t kTileCols = kTileVecs * V::L;
static_assert(kPanel % kTileCols == 0, "a tile must not straddle panels");

// The rows split into ceil(m / kMaxRows) tiles of kMaxRows rows, the last one shorter
// (greedy measured faster than balanced tiles: M = 8 as 6 + 2 beat 4 + 4).
inline std::int64_t row_tiles(std::int64_t m) { return (m + kMaxRows - 1) / kMaxRows; }

// A partial last column tile (n not a multiple of kTileCols): whole K per row tile
// through a scratch tile, then the valid columns copied out.
template <core::DType DT>
void linear_edge_tile(const PackedWeights& w, const void* wt, std::int64_t col0, std::int64_t cols,
                      const float* x, std::int64_t ldx, std::int64_t m, float* y,
                      std::int64_t ldy) {
  alignas(64) float tmp[kMaxRows * kTileCols];
  alignas(64) float tmp_bias[kTileCols];
  const float* bias = nullptr;
  if (w.bias != nullptr) {
    for (std::int64_t c = 0; c < kTileCols; ++c) tmp_bias[c] = c < cols ? w.bias[col0 + c] : 0.0f;
    bias = tmp_bias;
  }
  const std::int64_t tiles = row_tiles(m);
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t r0 = t * kMaxRows, r1 = r0 + kMaxRows < m ? r0 + kMaxRows : m;
    const int mr = static_cast<int>(r1 - r0);
    pick_tile<DT>(mr, std::make_integer_sequence<int, kMaxRows>())(
        wt, 0, w.k, w.k, x + r0 * ldx, ldx, tmp, kTileCols, bias, RowPrefetch{});
    for (int i = 0; i < mr; ++i)
      for (std::int64_t c = 0; c < cols; ++c) y[(r0 + i) * ldy + col0 + c] = tmp[i * kTileCols + c];
  }
}

// The prefetch of call u of `calls` over the block ending at ce of panel p: the packed
// k-rows of all panels are consecutive, so the next block's rows are the block_k rows
// from p*k + ce on (into panel p + 1 at the panel's end), clipped to the range's end
// p1*k; row j is prefetched by call j % calls, at its step j.
template <core::DType DT>
RowPrefetch block_prefetch(const PackedWeights& w, std::int64_t p, std::int64_t p1, std::int64_t ce,
                           std::int64_t u, std::int64_t calls) {
  constexpr std::int64_t row_bytes = kPanel * elem_size(DT);
  const std::int64_t first = p * w.k + ce;  // 2 or 3 blocks ahead measured no better
  const std::int64_t end = first + block_k<DT>() < p1 * w.k ? first + block_k<DT>() : p1 * w.k;
  RowPrefetch pf;
  if (end - first <= u) return pf;
  pf.base = static_cast<const char*>(w.data) + first * row_bytes;
  pf.stride = row_bytes;
  pf.count = end - first;
  pf.every = calls;
  pf.phase = u;
  return pf;
}

// M = 1 over P whole panels at once: P weight streams and P * NV independent fma chains.
// One panel at a time (one stream, NV chains) left the core waiting on DRAM: 0.5B bf16
// decode took ~37 ms of CPU per step, 4 panels ~30 ms (the streams' misses overlap, as
// in the 4-stream read probe). Each stream is prefetched kRowPrefetchBytes ahead
// (measured: 1 KiB best of 0.5-4 KiB; past a panel's end it reaches the next panel).
// Every column's operations are linear_tile's: the chunk's fma chain from +0 in k
// order, then s = s + p with s from +0 (kept in y between chunks), then the bias.
constexpr std::int64_t kRowPrefetchBytes = 1024;

static_assert(kPanelGroup % kRowPanels == 0, "ranges must start on whole kRowPanels groups");

template <int P, core::DType DT>
void linear_row_panels(const PackedWeights& w, const float* x, float* y, std::int64_t p) {
  constexpr int NV = kPanel / V::L;
  constexpr std::int64_t row_bytes = kPanel * elem_size(DT);
  const std::int64_t panel_bytes = w.k * row_bytes;
  const char* base = static_cast<const char*>(w.data) + p * panel_bytes;
  float* yp = y + p * kPanel;
  for (std::int64_t c0 = 0; c0 < w.k; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < w.k ? c0 + kChunk : w.k;
    typename V::reg acc[P][NV];
#pragma GCC unroll 8
    for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[q][v] = V::zero();
    for (std::int64_t i = c0; i < c1; ++i) {
#pragma GCC unroll 8
      for (int q = 0; q < P; ++q) {
        const char* ahead = base + q * panel_bytes + i * row_bytes + kRowPrefetchBytes;
#pragma GCC unroll 4
        for (std::int64_t b = 0; b < row_bytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
      }
      const typename V::reg xb = V::set1(x[i]);
#pragma GCC unroll 8
      for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
          const void* wq = base + q * panel_bytes;
          acc[q][v] = V::fma(xb, load_w<DT>(wq, i * kPanel + v * V::L), acc[q][v]);
        }
    }
    // s = s + p, s from +0, kept in y between chunks.
#pragma GCC unroll 8
    for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        float* o = yp + q * kPanel + v * V::L;
        V::store(o, V::add(c0 == 0 ? V::zero() : V::load(o), acc[q][v]));
      }
  }
  if (w.bias == nullptr) return;
  for (int q = 0; q < P; ++q)
    for (int v = 0; v < NV; ++v) {
      float* o = yp + q * kPanel + v * V::L;
      V::store(o, V::add(V::load(o), V::load(w.bias + (p + q) * kPanel + v * V::L)));
    }
}

template <core::DType DT>
void linear_dt(const PackedWeights& w, const float* x, std::int64_t ldx, std::int64_t m, float* y,
               std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  if (kRowPanels > 0 && m == 1) {  // whole panels kRowPanels at a time, then the rest
    const std::int64_t full = w.n / kPanel < p1 ? w.n / kPanel : p1;
    for (; p0 + kRowPanels <= full; p0 += kRowPanels)
      linear_row_panels<kRowPanels, DT>(w, x, y, p0);
    if (full - p0 == 3) linear_row_panels<3, DT>(w, x, y, p0);
    if (full - p0 == 2) linear_row_panels<2, DT>(w, x, y, p0);
    if (full - p0 == 1) linear_row_panels<1, DT>(w, x, y, p0);
    p0 = full > p0 ? full : p0;
  }
  const auto rows_seq = std::make_integer_sequence<int, kMaxRows>();
  const std::int64_t tiles = row_tiles(m);
  const std::int64_t block = m > 1 ? block_k<DT>() : w.k;
  for (std::int64_t p = p0; p < p1; ++p) {
    const auto* panel = static_cast<const std::uint8_t*>(w.data) + p * w.k * kPanel * elem_size(DT);
    const std::int64_t full_cols = (w.n - p * kPanel) / kTileCols * kTileCols;
    const std::int64_t slices = (full_cols < kPanel ? full_cols : kPanel) / kTileCols;
    const std::int64_t calls = slices * tiles;
    for (std::int64_t cb = 0; cb < w.k && slices > 0; cb += block) {
      const std::int64_t ce = w.k - cb < block ? w.k : cb + block;
      for (std::int64_t u = 0; u < calls; ++u) {
        const std::int64_t cs = u / tiles * kTileCols, t = u % tiles;
        const std::int64_t r0 = t * kMaxRows, r1 = r0 + kMaxRows < m ? r0 + kMaxRows : m;
        const std::int64_t col0 = p * kPanel + cs;
        const RowPrefetch pf = m > 1 ? block_prefetch<DT>(w, p, p1, ce, u, calls) : RowPrefetch{};
        pick_tile<DT>(static_cast<int>(r1 - r0), rows_seq)(
            panel + cs * elem_size(DT), cb, ce, w.k, x + r0 * ldx, ldx, y + r0 * ldy + col0, ldy,
            w.bias != nullptr ? w.bias + col0 : nullptr, pf);
      }
    }
    if (slices * kTileCols < kPanel && p * kPanel + full_cols < w.n) {
      const std::int64_t col0 = p * kPanel + full_cols;
      linear_edge_tile<DT>(w, panel + full_cols * elem_size(DT), col0, w.n - col0, x, ldx, m, y,
                           ldy);
    }
  }
}

[[maybe_unused]] void linear_simd(const PackedWeights& w, const float* x, std::int64_t ldx,
                                  std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0,
                                  std::int64_t p1) {
  switch (w.dtype) {
    case core::DType::kF32:
      linear_dt<core::DType::kF32>(w, x, ldx, m, y, ldy, p0, p1);
      break;
    case core::DType::kBF16:
      linear_dt<core::DType::kBF16>(w, x, ldx, m, y, ldy, p0, p1);
      break;
    case core::DType::kF16:
      linear_dt<core::DType::kF16>(w, x, ldx, m, y, ldy, p0, p1);
      break;
  }
}
