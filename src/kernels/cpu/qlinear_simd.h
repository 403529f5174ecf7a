// The quantized panel kernel (cpu/qlinear.h layout), written once for a block-dot policy D:
//   D::L lanes (output columns), D::kShifted (x is read as x + 128, unsigned),
//   D::load(p): the D::L columns' 4 weights of one kq row; D::dot(acc, w, x4): acc plus,
//   per lane, the 4 products of its weights with the 4 int8 of x4 (broadcast), exact;
//   D::isum(acc, wsum): the block's exact integer dot product per lane (wsum: int16);
//   D::loadh(p): D::L binary16 scales widened exactly;
//   nibble form: D::nibbles(p, lo, hi): the low and high nibbles of the D::L columns' 4
//   bytes; D::dotu(acc, u, x4) (kSum16 false): acc plus the 4 products of unsigned u with
//   signed x4, exact;
//   D::shl / shr (32-bit lanes), and8 (a byte mask), or8, or_and8 (a | (b & mask)): the
//   planes' bits; D::kSum16: the nibble form sums products in int16 first (D::prod16,
//   add16, then widen16 into acc) where a product is not one instruction into int32;
//   D::kNibbleStreamCols: the nibble form's vectors per tile up to kStreamRows rows.
// Included ONLY by qlinear_avx2.cpp and qlinear_avx512.cpp inside an anonymous namespace
// (each with its policies: qlinear_dot256.h, DotVnni512);
// no include guard.
//
// Lanes run over output columns, never over a reduction: each lane performs the
// reference's sequence (ref::quant_linear) for its column: isum (exact, any order), then
// v = (dw * dx) * float(isum), s = s + v over the blocks in order from +0, then s + bias.
// A tile holds R rows, so each weight vector loaded is applied to R rows.

constexpr std::int64_t kQB = 32;  // ref::kQuantBlock
constexpr int kMaxQRows = 4;

inline std::int32_t load4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The column vectors of a tile: vector c's first block in the panels, its index in d, and
// whether it prefetches (one vector per 64-byte line); the tile runs blocks [b0, b1).
// next_blocks > 0 (the int8 form's second row tile over a run): the tile prefetches the
// next run's weights instead, vector c's at next[c] (null: none; next_blocks blocks), so that their
// read from memory overlaps this run's arithmetic rather than stalling the next run's
// first row tile.
template <int C>
struct QCols {
  const std::int8_t* w[C];
  std::int64_t d0[C];   // in wsum / sm / mm (qd_index)
  std::int64_t dd0[C];  // in d / dm (qdm_index: the K formats' super-block cells)
  bool prefetch[C];
  std::int64_t b0, b1;
  const std::int8_t* next[C];
  std::int64_t next_blocks;
};

// Rows' activations for a tile: int8 values, block scales, half sums (has_min only).
struct QRows {
  const std::int8_t* x[kMaxQRows];
  const float* d[kMaxQRows];
  const std::int32_t* xs[kMaxQRows];
};

// The block form: kP < 0 the int8 form, else the nibble form with kP bit planes.
// Bytes of one block of one 16-column group.
template <int kP>
constexpr std::int64_t kBlockBytes = kP < 0 ? kQuantGroup* kQB : 256 + 64 * kP;

// The plane (bit kq of each byte: row kq's bit 4 of u) shifted to bring bit kq to bit 4.
template <class D>
__attribute__((always_inline)) inline typename D::ireg plane_shift(typename D::ireg plane, int kq) {
  return kq <= 4 ? D::shl(plane, 4 - kq) : D::shr(plane, kq - 4);
}

// acc[h][r] plus the products of block b's weights (at wb) with row r's x, summed per
// lane; h is the block's half (kq / 4) when kAcc == 2, else 0. The int8 form: 8 rows of
// 64 bytes (D::dot); the nibble form: 4 rows, each unpacked (D::nibbles) into the low bits
// of u of rows 2t and 2t + 1, with the planes' high bits, then D::dotu (unsigned u).
template <class D, int R, int kAcc, int kP>
__attribute__((always_inline)) inline void qblock_dots(const std::int8_t* wb, const QRows& a,
                                                       std::int64_t b, bool prefetch,
                                                       typename D::ireg (&acc)[kAcc][R]) {
  constexpr int kShift = kAcc == 2 ? 2 : 3;             // kq / 4 with halves, else 0
  constexpr std::int64_t kAhead = 8 * kBlockBytes<kP>;  // prefetch 8 blocks ahead
  const auto fetch = [&](int line) {                    // one prefetch per 64-byte line
    if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(wb + kAhead + line * 64), _MM_HINT_T0);
  };
  if constexpr (kP < 0) {
#pragma GCC unroll 8
    for (int kq = 0; kq < 8; ++kq) {
      fetch(kq);
      const typename D::ireg wv = D::load(wb + kq * kQuantGroup * 4);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[kq >> kShift][r] = D::dot(acc[kq >> kShift][r], wv, load4(a.x[r] + b * kQB + kq * 4));
    }
  } else {
    typename D::ireg planes[kP > 0 ? kP : 1];  // the plane (kP 1) or the crumb rows (kP 2)
    // D::kSum16: a row's products u * x summed in int16 over kT16 t's (2 kT16 products of
    // pairs, each |p| <= 2 * (2^(4 + kP) - 1) * 128: 2 kT16 |p| <= 32256 for kP 2, 1 t;
    // 31744 for kP 1, 2 t; 30720 for kP 0, 4 t), never across a half (kAcc 2): exact.
    constexpr int kT16 = kP == 0 && kAcc == 1 ? 4 : kP == 2 ? 1 : 2;
    [[maybe_unused]] typename D::ireg p16[R];
    for (int p = 0; p < kP; ++p) {
      fetch(4 + p);
      planes[p] = D::load(wb + 256 + 64 * p);
    }
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      fetch(t);
      typename D::ireg lo, hi;
      D::nibbles(wb + t * kQuantGroup * 4, lo, hi);
      if constexpr (kP == 1) {
        lo = D::or_and8(lo, plane_shift<D>(planes[0], 2 * t), 0x10);
        hi = D::or_and8(hi, plane_shift<D>(planes[0], 2 * t + 1), 0x10);
      }
      if constexpr (kP == 2) {  // rows 2t, 2t + 1 at bits 4-5, 6-7 (t even) or 0-1, 2-3
        const typename D::ireg c = planes[t / 2];
        lo = D::or_and8(lo, t % 2 == 0 ? c : D::shl(c, 4), 0x30);
        hi = D::or_and8(hi, t % 2 == 0 ? D::shr(c, 2) : D::shl(c, 2), 0x30);
      }
      const int h = (2 * t) >> kShift;  // rows 2t and 2t + 1 lie in one half
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const std::int8_t* x = a.x[r] + b * kQB + t * 8;
        if constexpr (D::kSum16) {  // int16 pair sums of kT16 t's, then one widening add
          const typename D::ireg p = D::add16(D::prod16(lo, load4(x)), D::prod16(hi, load4(x + 4)));
          p16[r] = t % kT16 == 0 ? p : D::add16(p16[r], p);
          if (t % kT16 == kT16 - 1) acc[h][r] = D::widen16(acc[h][r], p16[r]);
        } else {
          acc[h][r] = D::dotu(D::dotu(acc[h][r], lo, load4(x)), hi, load4(x + 4));
        }
      }
    }
  }
}

// The block scales' streams (d, wsum; sm, mm, dm) of vector c, kScaleAhead blocks ahead:
// 2 bytes per column and cell, so one 64-byte line of 16 columns per 2 cells, prefetched
// on even blocks (d and dm: on even cells; a K format's cell spans 8 blocks). The hardware
// prefetcher alone left the M = 1 kernels waiting on them.
constexpr std::int64_t kScaleAhead = 16;
template <int C>
__attribute__((always_inline)) inline void fetch_scales(const QuantPacked& w, const QCols<C>& cols,
                                                        int c, std::int64_t b) {
  if ((b & 1) != 0) return;
  const std::int64_t at = cols.d0[c] + (b + kScaleAhead) * kQuantGroup;
  const std::int64_t atd = cols.dd0[c] + ((b + kScaleAhead) >> w.dshift) * kQuantGroup;
  const auto line = [](const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); };
  if (((b >> w.dshift) & 1) == 0) {  // b even: for dshift 0 always
    line(w.d + atd);
    if (w.dm != nullptr) line(w.dm + atd);
  }
  if (w.wsum != nullptr) line(w.wsum + at);
  if (w.sm != nullptr) line(w.sm + at);
  if (w.mm != nullptr) line(w.mm + at);
}

// The exact integer sum of q * x of row r over block b (half < 0) or its half `half`, from
// its accumulator: D::isum (int8 form), or sum u * x - offset * (sum of x) (nibble form).
template <class D, int kP>
__attribute__((always_inline)) inline typename D::ireg block_isum(typename D::ireg acc,
                                                                  const QuantPacked& w,
                                                                  const QRows& a, int r,
                                                                  std::int64_t b, std::int64_t at,
                                                                  int half) {
  if constexpr (kP < 0) {
    return D::isum(acc, (half == 1 ? w.wsum_hi : w.wsum) + at);
  } else {
    if (w.offset == 0) return acc;
    const std::int32_t* xs = a.xs[r] + 2 * b;
    return D::addi(acc, D::set1i(-w.offset * (half < 0 ? xs[0] + xs[1] : xs[half])));
  }
}

// The block loop of q8_0 (the int8 form, no sub-scales) with the C vectors side by side:
// each kq row's broadcast of a row's x serves all C weight vectors, and the R x C
// accumulators are independent chains (written as qblocks_plain, the compiler kept one
// vector's block at a time and spilled). kFetch false: no prefetch instruction at all (a
// later row tile over a run of blocks whose weights the first row tile brought into L1).
// kNext: prefetch the next run's weights (QCols::next), one line per kq row and vector.
template <class D, int R, int C, bool kFetch, bool kNext>
__attribute__((always_inline)) inline void qblocks_int8(const QuantPacked& w, const QRows& a,
                                                        const QCols<C>& cols, typename D::freg* s) {
  constexpr std::int64_t kAhead = 8 * kBlockBytes<-1>;  // prefetch 8 blocks ahead
  for (std::int64_t b = cols.b0; b < cols.b1; ++b) {
    // Each accumulator starts at the block's exact correction (D::isum of zero: -128 sum w
    // on the shifted form), so the epilogue converts it as it is: integer sums, any order.
    typename D::ireg acc[C][R];
    for (int c = 0; c < C; ++c) {
      const typename D::ireg start = D::isum(D::izero(), w.wsum + cols.d0[c] + b * kQuantGroup);
      for (int r = 0; r < R; ++r) acc[c][r] = start;
    }
#pragma GCC unroll 8
    for (int kq = 0; kq < 8; ++kq) {
      typename D::ireg wv[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const std::int8_t* wb = cols.w[c] + b * kBlockBytes<-1> + kq * kQuantGroup * 4;
        if (kFetch && cols.prefetch[c]) {
          _mm_prefetch(reinterpret_cast<const char*>(wb + kAhead), _MM_HINT_T0);
          if (kq == 0) fetch_scales(w, cols, c, b);
        }
        if (kNext && cols.next[c] != nullptr && b - cols.b0 < cols.next_blocks)
          _mm_prefetch(reinterpret_cast<const char*>(
                           cols.next[c] + (b - cols.b0) * kBlockBytes<-1> + kq * kQuantGroup * 4),
                       _MM_HINT_T0);
        wv[c] = D::load(wb);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const std::int32_t x4 = load4(a.x[r] + b * kQB + kq * 4);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) acc[c][r] = D::dot(acc[c][r], wv[c], x4);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const std::int64_t at = cols.d0[c] + b * kQuantGroup;
      const typename D::freg dw = D::loadh(w.d + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const typename D::freg isum = D::cvt(acc[c][r]);
        s[c * R + r] = D::add(s[c * R + r], D::mul(D::mul(dw, D::set1(a.d[r][b])), isum));
      }
    }
  }
}

// The block loop of the q8_0 / q4_0 / q5_0 formats: one accumulator per row and block.
template <class D, int R, int C, int kP>
__attribute__((always_inline)) inline void qblocks_plain(const QuantPacked& w, const QRows& a,
                                                         const QCols<C>& cols,
                                                         typename D::freg* s) {
  if constexpr (kP < 0) {
    bool fetch = false;
    for (int c = 0; c < C; ++c) fetch = fetch || cols.prefetch[c];
    if (fetch)
      qblocks_int8<D, R, C, true, false>(w, a, cols, s);
    else if (cols.next_blocks > 0)
      qblocks_int8<D, R, C, false, true>(w, a, cols, s);
    else
      qblocks_int8<D, R, C, false, false>(w, a, cols, s);
    return;
  }
  for (std::int64_t b = cols.b0; b < cols.b1; ++b) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      typename D::ireg acc[1][R];
      for (int r = 0; r < R; ++r) acc[0][r] = D::izero();
      qblock_dots<D, R, 1, kP>(cols.w[c] + b * kBlockBytes<kP>, a, b, cols.prefetch[c], acc);
      if (cols.prefetch[c]) fetch_scales(w, cols, c, b);
      const std::int64_t at = cols.d0[c] + b * kQuantGroup;
      const typename D::freg dw = D::loadh(w.d + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const typename D::freg isum = D::cvt(block_isum<D, kP>(acc[0][r], w, a, r, b, at, -1));
        s[c * R + r] = D::add(s[c * R + r], D::mul(D::mul(dw, D::set1(a.d[r][b])), isum));
      }
    }
  }
}

// The block loop of the formats with sub-scales (and a min term when kMin):
//   kSplit (q2_k, q3_k, q6_k: 16-weight sub-blocks): the halves of a block (kq 0..3 and
//     4..7) are summed apart, isum = s_lo * lo + s_hi * hi, msum = m_lo * xs_lo + m_hi * xs_hi;
//   else (q4_1, q5_1, q4_k, q5_k: s_lo = s_hi, m_lo = m_hi): one sum, isum = s_lo * (lo + hi)
//     and msum = m_lo * (xs_lo + xs_hi), the same integers;
// then v = (d * dx) * float(isum), with a min v - (dm * dx) * float(msum), s = s + v:
// ref::block_value_scaled.
template <class D, int R, int C, bool kSplit, bool kMin, int kP>
__attribute__((always_inline)) inline void qblocks_ext(const QuantPacked& w, const QRows& a,
                                                       const QCols<C>& cols, typename D::freg* s) {
  constexpr int kAcc = kSplit ? 2 : 1;
  for (std::int64_t b = cols.b0; b < cols.b1; ++b)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      typename D::ireg acc[kAcc][R];
      for (int h = 0; h < kAcc; ++h)
        for (int r = 0; r < R; ++r) acc[h][r] = D::izero();
      qblock_dots<D, R, kAcc, kP>(cols.w[c] + b * kBlockBytes<kP>, a, b, cols.prefetch[c], acc);
      if (cols.prefetch[c]) fetch_scales(w, cols, c, b);
      const std::int64_t at = cols.d0[c] + b * kQuantGroup;
      const std::int64_t atd = cols.dd0[c] + (b >> w.dshift) * kQuantGroup;
      const typename D::freg dw = D::loadh(w.d + atd);
      const typename D::ireg sm = D::loadi16(w.sm + at);  // bytes s_lo, s_hi (split) or m
      const typename D::ireg slo = D::template sbyte<0>(sm);
      typename D::ireg mm = sm;  // split with a min: bytes m_lo, m_hi
      if constexpr (kSplit && kMin) mm = D::loadi16(w.mm + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        typename D::ireg isum =
            D::mullo(block_isum<D, kP>(acc[0][r], w, a, r, b, at, kSplit ? 0 : -1), slo);
        if constexpr (kSplit)
          isum = D::addi(isum, D::mullo(block_isum<D, kP>(acc[1][r], w, a, r, b, at, 1),
                                        D::template sbyte<1>(sm)));
        const typename D::freg dx = D::set1(a.d[r][b]);
        typename D::freg v = D::mul(D::mul(dw, dx), D::cvt(isum));
        if constexpr (kMin) {
          const std::int32_t* xs = a.xs[r] + 2 * b;
          typename D::ireg msum;
          if constexpr (kSplit)
            msum = D::addi(D::mullo(D::template sbyte<0>(mm), D::set1i(xs[0])),
                           D::mullo(D::template sbyte<1>(mm), D::set1i(xs[1])));
          else
            msum = D::mullo(D::template sbyte<1>(sm), D::set1i(xs[0] + xs[1]));
          v = D::sub(v, D::mul(D::mul(D::loadh(w.dm + atd), dx), D::cvt(msum)));
        }
        s[c * R + r] = D::add(s[c * R + r], v);
      }
    }
}

// The block loops of w's form and format.
template <class D, int R, int C, int kP>
void qblocks(const QuantPacked& w, const QRows& a, const QCols<C>& cols, typename D::freg* s) {
  if (!w.ext)
    qblocks_plain<D, R, C, kP>(w, a, cols, s);
  else if (w.split)
    w.has_min ? qblocks_ext<D, R, C, true, true, kP>(w, a, cols, s)
              : qblocks_ext<D, R, C, true, false, kP>(w, a, cols, s);
  else
    w.has_min ? qblocks_ext<D, R, C, false, true, kP>(w, a, cols, s)
              : qblocks_ext<D, R, C, false, false, kP>(w, a, cols, s);
}

// A run of blocks [b0, b0 + blocks) of the column group at (p, l0); blocks 0: none.
struct QRun {
  std::int64_t p = 0, l0 = 0, b0 = 0, blocks = 0;
};

// Columns [l0, l0 + C D::L) of panel p (l0 a multiple of D::L), rows a[0..R), blocks
// [b0, b1): sums into out[r] (C D::L floats each), which hold the sums of blocks [0, b0)
// when b0 > 0 (s = s + v continues over the blocks in order); the bias is added with the
// last block. Vector c's columns are a stream of their own, prefetched when `fetch` (the
// first row tile over these blocks; the others find them in L1).
template <class D, int R, int C>
void qtile(const QuantPacked& w, const QRows& a, std::int64_t p, std::int64_t l0, float* const* out,
           const float* bias, std::int64_t b0, std::int64_t b1, bool fetch, const QRun& next) {
  typename D::freg s[C * R];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) s[c * R + r] = b0 == 0 ? D::fzero() : D::loadf(out[r] + c * D::L);
  QCols<C> cols;
  cols.b0 = b0;
  cols.b1 = b1;
  for (int c = 0; c < C; ++c) {
    const std::int64_t l = l0 + c * D::L;
    cols.w[c] =
        w.qs + (w.nibble ? nibble_base(w.nb, w.planes, p, 0, l) : qs_offset(w.nb, p, 0, l, 0));
    cols.d0[c] = qd_index(w.nb, p, 0, l);
    cols.dd0[c] = qdm_index(w, p, 0, l);
    // One vector per 16-column group prefetches (with 8 lanes, two share its lines).
    const bool lead = D::L == kQuantGroup || l % kQuantGroup == 0;
    cols.prefetch[c] = fetch && lead;
    cols.next[c] = w.nibble || next.blocks == 0 || !lead
                       ? nullptr
                       : w.qs + qs_offset(w.nb, next.p, next.b0, next.l0 + c * D::L, 0);
  }
  cols.next_blocks = next.blocks;
  if (!w.nibble)
    qblocks<D, R, C, -1>(w, a, cols, s);
  else if (w.planes == 0)
    qblocks<D, R, C, 0>(w, a, cols, s);
  else if (w.planes == 1)
    qblocks<D, R, C, 1>(w, a, cols, s);
  else
    qblocks<D, R, C, 2>(w, a, cols, s);
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      if (bias != nullptr && b1 == w.nb)
        s[c * R + r] = D::add(s[c * R + r], D::loadf(bias + c * D::L));
      D::storef(out[r] + c * D::L, s[c * R + r]);
    }
}

template <class D, int C, int... I>
void qtile_rows(int rows, const QuantPacked& w, const QRows& a, std::int64_t p, std::int64_t l0,
                float* const* out, const float* bias, std::int64_t b0, std::int64_t b1, bool fetch,
                const QRun& next, std::integer_sequence<int, I...>) {
  using Fn = void (*)(const QuantPacked&, const QRows&, std::int64_t, std::int64_t, float* const*,
                      const float*, std::int64_t, std::int64_t, bool, const QRun&);
  constexpr Fn fns[] = {&qtile<D, I + 1, C>...};
  fns[rows - 1](w, a, p, l0, out, bias, b0, b1, fetch, next);
}

// The run after blocks [b0, b1) of the column group at (p, l0) in qlinear_cols's order
// (blocks, then column groups, then panels below p1), `run` blocks long at most; none
// past the last.
template <class D, int C>
QRun next_run(const QuantPacked& w, std::int64_t p, std::int64_t l0, std::int64_t b1,
              std::int64_t run, std::int64_t p1) {
  QRun r{p, l0, b1, 0};
  if (b1 >= w.nb) {
    r.b0 = 0;
    r.l0 = l0 + C * D::L;
    if (r.l0 >= kPanel || p * kPanel + r.l0 >= w.n) {
      r.p = p + 1;
      r.l0 = 0;
      if (r.p >= p1) return r;
    }
  }
  r.blocks = w.nb - r.b0 < run ? w.nb - r.b0 : run;
  return r;
}

// Up to kStreamRows rows, a tile spans kStreamCols vectors (the whole 64-column panel
// with 16 lanes): four weight streams in flight instead of one. At M = 1 a single stream
// read the q8_0 panels at ~20 GB/s where the bf16 kernel's four reach ~30 (bench_quant).
// The nibble form takes D::kNibbleStreamCols vectors instead (see the policies).
// More rows reuse each weight vector instead, in tiles of kMaxQRows rows and one vector.
constexpr int kStreamRows = 2;
template <class D>
constexpr int kStreamCols = static_cast<int>(kPanel / D::L) < 4 ? static_cast<int>(kPanel / D::L)
                                                                : 4;

// Blocks per run when several row tiles share a column group: about kRunBytes of the C
// vectors' packed weights. Measured (bench_quant BM_Q8VsBf16Linear, one thread, q8_0 time
// over bf16's in the same run): 16 KiB best of 4-64 KiB; against whole rows 0.51 -> 0.40 at
// M = 256 (K = 896) and 0.57 -> 0.52 at M = 16 (K = 4864).
constexpr std::int64_t kRunBytes = 16384;
template <class D, int C>
std::int64_t tile_blocks(const QuantPacked& w) {
  const std::int64_t per_block =
      C * (w.nibble ? nibble_block_bytes(w.planes) : kBlockBytes<-1>)*D::L / kQuantGroup;
  const std::int64_t n = kRunBytes / per_block;
  return n > 0 ? n : 1;
}

template <class D, int C, int kRows>
void qlinear_cols(const QuantPacked& w, const std::int8_t* xq, const float* xd,
                  const std::int32_t* xs, std::int64_t m, float* y, std::int64_t ldy,
                  std::int64_t p0, std::int64_t p1) {
  constexpr std::int64_t kCols = C * D::L;
  alignas(64) float tmp[kRows][kCols];
  alignas(64) float bias_tmp[kCols];
  for (std::int64_t p = p0; p < p1; ++p) {
    for (std::int64_t l0 = 0; l0 < kPanel && p * kPanel + l0 < w.n; l0 += kCols) {
      const std::int64_t col0 = p * kPanel + l0;
      const std::int64_t cols = w.n - col0 < kCols ? w.n - col0 : kCols;
      const float* bias = w.bias != nullptr ? w.bias + col0 : nullptr;
      if (cols < kCols && bias != nullptr) {  // a partial last column group
        for (std::int64_t c = 0; c < kCols; ++c) bias_tmp[c] = c < cols ? bias[c] : 0.0f;
        bias = bias_tmp;
      }
      // Several row tiles over full columns: the blocks in runs (tile_blocks), every row
      // tile over a run while its weights are in L1 (the sums wait in y between runs).
      const std::int64_t run = m > kRows && cols == kCols ? tile_blocks<D, C>(w) : w.nb;
      for (std::int64_t b0 = 0; b0 < w.nb; b0 += run) {
        const std::int64_t b1 = w.nb - b0 < run ? w.nb : b0 + run;
        for (std::int64_t r0 = 0; r0 < m; r0 += kRows) {
          const int rows = static_cast<int>(m - r0 < kRows ? m - r0 : kRows);
          QRows a{};
          float* out[kMaxQRows];
          for (int r = 0; r < rows; ++r) {
            a.x[r] = xq + (r0 + r) * w.k;
            a.d[r] = xd + (r0 + r) * w.nb;
            a.xs[r] = reads_act_sums(w) ? xs + (r0 + r) * 2 * w.nb : nullptr;
            out[r] = cols == kCols ? y + (r0 + r) * ldy + col0 : tmp[r];
          }
          // The second row tile brings the next run's weights in (the first finds them).
          const QRun next = r0 == kRows ? next_run<D, C>(w, p, l0, b1, run, p1) : QRun{};
          qtile_rows<D, C>(rows, w, a, p, l0, out, bias, b0, b1, r0 == 0, next,
                           std::make_integer_sequence<int, kRows>());
          if (cols == kCols) continue;
          for (int r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c) y[(r0 + r) * ldy + col0 + c] = tmp[r][c];
        }
      }
    }
  }
}

template <class D>
void qlinear_panels(const QuantPacked& w, const QuantRows& x, float* y, std::int64_t ldy,
                    std::int64_t p0, std::int64_t p1) {
  // The activations as the policy reads them: x + 128 (vpdpbusd's unsigned operand) over
  // the int8 form, made once per input by QuantActs; the nibble form's unsigned operand is
  // u, so it reads x.
  const std::int8_t* xq = D::kShifted && !w.nibble ? x.u : x.q;
  DETINFER_INTERNAL_CHECK(xq != nullptr);
  if (x.m <= kStreamRows && w.nibble)
    qlinear_cols<D, D::kNibbleStreamCols, kStreamRows>(w, xq, x.d, x.xs, x.m, y, ldy, p0, p1);
  else if (x.m <= kStreamRows)
    qlinear_cols<D, kStreamCols<D>, kStreamRows>(w, xq, x.d, x.xs, x.m, y, ldy, p0, p1);
  else if (D::kRowCols > 1 && !w.split)
    qlinear_cols<D, D::kRowCols, kMaxQRows>(w, xq, x.d, x.xs, x.m, y, ldy, p0, p1);
  else
    qlinear_cols<D, 1, kMaxQRows>(w, xq, x.d, x.xs, x.m, y, ldy, p0, p1);
}
