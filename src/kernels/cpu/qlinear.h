// Internal interface of the quantized linear (quantized spec v1): the packed layout and the
// per-ISA panel kernels and activation quantizers. Activations are quantized once per input
// before any kernel runs (QuantizeActsFn: ref::quantize_act_row's bytes on every ISA), so
// every kernel reads the same int8 rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

namespace detinfer::kernels::cpu {

// Quantized weights repacked for the kernels: panels of kPanel (64) output columns, each
// four groups of 16 columns; a group holds its blocks b = 0..nb-1 (k = 32b .. 32b+31) in
// order, so a kernel walking one group reads one sequential stream. Two forms of a block:
//   int8 (q8_0; any format with nibble = false): 512 bytes per block and group; the 32
//     weights of each column are interleaved by 4: byte (kq * 16 + c) * 4 + t holds the
//     weight q of column c of the group at k = 32b + 4kq + t (qs_offset), so one 64-byte
//     row (kq) gives 16 columns x 4 k, and a kernel's lanes run over columns with no
//     horizontal sum.
//   nibble (every other format): u = q + offset, unsigned, in 4 + planes bits (offset 8,
//     planes 0: q4_0; 4, 0: q3_k; 0, 0: q4_1, q4_k, q2_k; 16, 1: q5_0; 0, 1: q5_1, q5_k;
//     32, 2: q6_k), in 256 + 64 planes bytes per block and group (nibble_base): byte
//     (t * 16 + c) * 4 + j holds in its low nibble the low 4 bits of u of column c at
//     k = 32b + 8t + j (the int8 form's row kq = 2t) and in its high nibble those at
//     k = 32b + 8t + 4 + j (row 2t + 1); then with one plane (5 bits), 64 bytes at 256:
//     bit kq of byte c * 4 + j is bit 4 of u at k = 32b + 4kq + j; with two (6 bits), two
//     64-byte crumb rows at 256 + 64T (T = kq / 4): bits crumb_shift(kq) and the next of
//     byte c * 4 + j are bits 4 and 5 of u at k = 32b + 4kq + j (rows 4T, 4T + 1 at bits
//     4-5 and 6-7, rows 4T + 2, 4T + 3 at bits 0-1 and 2-3). So one 64-byte row masked with
//     0x0F gives int8 row 2t as unsigned bytes, shifted right by 4 row 2t + 1; the plane
//     shifted to move bit kq to bit 4 and masked adds row kq's high bit, and crumb row
//     t / 2 shifted by 0 / 2 (t even: right) or 4 / 2 (t odd: left) and masked with 0x30
//     adds rows 2t and 2t + 1's high bits (one shift and mask per row, where two planes
//     took two). Kernels sum u * x exactly and subtract offset * (sum of the block's (or
//     half's) x): the same integer as sum q * x, the same fold order as the int8 form, so
//     the nibble form changes no result bit (docs/numerics.md).
// Per block and column, at qd_index (16 columns of a group consecutive):
//   d     the block's scale (ref::BlockScales::d) as binary16 bits (every format's d is a
//         binary16 widened, so the kernels widen these bits back exactly: vcvtph2ps),
//   wsum  (int8 form only) the sum of its 32 weights as int16 (|sum| <= 4096; for the
//         vpdpbusd offset form); for `split` formats the sum of k 0..15 only, wsum_hi that
//         of k 16..31.
// Half-width d and wsum: a q8_0 decode step reads 576 bytes per 512 weights, not 640.
// `ext` formats (sub-scales or a min term: q4_1, q5_1 and the K formats) also hold, at
// qd_index, `sm`: int16 whose byte 0 is the sub-scale of the block's first half
// (ref::BlockScales s[0]) and byte 1 that of its second half s[1] (`split` formats) or its
// integer min m[0] (the others, where s[1] = s[0] and m[1] = m[0]), each within int8; split
// formats with a min (q2_k) hold the mins m[0], m[1] as bytes 0 and 1 of `mm`. With has_min,
// `dm` holds the min scale as binary16 bits (also a binary16 widened). A K format's d and dm
// are its super-block's (8 blocks), so d and dm hold one cell per 2^dshift blocks
// (qdm_index; dshift 3 for the K formats, 0 for the others): a q4_k block of a 16-column
// group reads 256 + 32 + 8 bytes (weights, sm, d and dm), not 256 + 64 + 32 + 32. Columns past n
// hold zeros. Any format decodes to the int8 form exactly, and the nibble ones to the nibble form.
struct QuantPacked {
  const std::int8_t* qs = nullptr;     // 64-byte aligned
  const std::uint16_t* d = nullptr;    // at qd_index, binary16 bits
  const std::int16_t* wsum = nullptr;  // at qd_index; null in the nibble form
  QuantFormat format = QuantFormat::kQ8_0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t nb = 0;      // k / 32
  std::int64_t panels = 0;  // ceil(n / 64)
  const float* bias = nullptr;
  bool ext = false;      // sub-scales (q4_1, q5_1, K formats)
  bool split = false;    // the halves' sub-scales differ (q2_k, q3_k, q6_k): summed apart
  bool has_min = false;  // a min term (q4_1, q5_1, q2_k, q4_k, q5_k)
  const std::int16_t* wsum_hi = nullptr;  // split
  const std::int16_t* sm = nullptr;       // ext: bytes s[0], then s[1] (split) or m[0]
  const std::int16_t* mm = nullptr;       // split and has_min: bytes m[0], m[1]
  const std::uint16_t* dm = nullptr;      // has_min, binary16 bits, at qdm_index
  int dshift = 0;                         // d and dm: one cell per 2^dshift blocks
  bool nibble = false;                    // the nibble form (4 + planes bits per weight)
  std::int32_t offset = 0;                // nibble: u = q + offset
  int planes = 0;                         // nibble: bit planes above the nibble (0..2)
  // Bytes at qs: panels * kPanel columns of k weights, 8 (int8) or 4 + planes bits each.
  std::int64_t qs_bytes() const { return panels * kPanel * (nibble ? k * (4 + planes) / 8 : k); }
};

// Whether the kernels read the activations' half sums (ref::act_half_sums): a min term, or
// the nibble form's offset.
inline bool reads_act_sums(const QuantPacked& w) { return w.has_min || w.offset != 0; }

// The nibble form of format f: u = q + offset within 4 + planes bits unsigned; offset -1
// when f has none (q8_0).
struct NibbleForm {
  int offset = -1;
  int planes = 0;
};
NibbleForm nibble_form(QuantFormat f);

// The arrays behind a QuantPacked (pack_quant_panels); move-only, as view points into them.
struct QuantPanels {
  std::vector<std::int8_t> storage;  // qs at a 64-byte aligned offset
  std::vector<std::uint16_t> d, dm;
  std::vector<std::int16_t> wsum, wsum_hi, sm, mm;
  QuantPacked view;
  QuantPanels() = default;
  QuantPanels(QuantPanels&&) = default;
  QuantPanels& operator=(QuantPanels&&) = default;
  QuantPanels(const QuantPanels&) = delete;
  QuantPanels& operator=(const QuantPanels&) = delete;
  std::size_t bytes() const {
    return storage.size() +
           (d.size() + dm.size() + wsum.size() + wsum_hi.size() + sm.size() + mm.size()) * 2;
  }
};

// n rows of k weights in `f`'s ggml blocks decoded (ref::decode_block) into panels; the
// panels split over `pool`'s threads when given (each panel's cells are its own: the
// same bytes for any thread count).
// nibble = false keeps every format in the int8 form (the tests' comparison).
QuantPanels pack_quant_panels(const void* blocks, QuantFormat f, std::int64_t n, std::int64_t k,
                              const float* bias, core::ThreadPool* pool = nullptr,
                              bool nibble = true);

inline constexpr std::int64_t kQuantGroup = 16;  // columns interleaved together

// Byte j (0..3) of a packed scale word, sign-extended (sm and mm use bytes 0 and 1).
inline std::int32_t sm_byte(std::int32_t word, int j) {
  return static_cast<std::int8_t>(static_cast<std::uint32_t>(word) >> (8 * j));
}
// Two int8 values as the bytes 0 and 1 of an int16 (sm, mm).
inline std::int16_t pack_sm(std::int32_t b0, std::int32_t b1) {
  return static_cast<std::int16_t>(
      static_cast<std::uint16_t>(static_cast<std::uint8_t>(b0) |
                                 (static_cast<std::uint16_t>(static_cast<std::uint8_t>(b1)) << 8)));
}

// Index in d / wsum of panel p, block b, column l of the panel.
inline std::int64_t qd_index(std::int64_t nb, std::int64_t p, std::int64_t b, std::int64_t l) {
  return (p * kPanel + (l / kQuantGroup) * kQuantGroup) * nb + b * kQuantGroup + l % kQuantGroup;
}

// Index in d / dm of panel p, block b, column l: one cell per 2^dshift blocks.
inline std::int64_t qdm_index(const QuantPacked& w, std::int64_t p, std::int64_t b,
                              std::int64_t l) {
  return qd_index(w.nb >> w.dshift, p, b >> w.dshift, l);
}

// The integer sub-scale (1 without sub-scales) and min of half h (0, 1) of the block whose
// cell is at (qd_index), as ref::BlockScales s[h] and m[h].
inline std::int32_t packed_sub_scale(const QuantPacked& w, std::int64_t at, int h) {
  return !w.ext ? 1 : sm_byte(w.sm[at], w.split ? h : 0);
}
inline std::int32_t packed_sub_min(const QuantPacked& w, std::int64_t at, int h) {
  return !w.has_min ? 0 : w.split ? sm_byte(w.mm[at], h) : sm_byte(w.sm[at], 1);
}

// Byte offset in qs of the weight of panel p, block b, column l of the panel, k-in-block i.
inline std::int64_t qs_offset(std::int64_t nb, std::int64_t p, std::int64_t b, std::int64_t l,
                              std::int64_t i) {
  return ((p * kPanel + (l / kQuantGroup) * kQuantGroup) * nb + b * kQuantGroup) * 32 +
         ((i / 4) * kQuantGroup + l % kQuantGroup) * 4 + i % 4;
}

// Bytes of one block of one 16-column group in the nibble form.
inline std::int64_t nibble_block_bytes(int planes) { return 256 + 64 * std::int64_t{planes}; }

// Byte offset in qs (nibble form) of block b of the group of column l of panel p, plus the
// column's lane (l % 16) * 4: its byte j (0..3) of nibble row t is at + 64t + j, of plane P
// at + 256 + 64P + j.
inline std::int64_t nibble_base(std::int64_t nb, int planes, std::int64_t p, std::int64_t b,
                                std::int64_t l) {
  return ((p * (kPanel / kQuantGroup) + l / kQuantGroup) * nb + b) * nibble_block_bytes(planes) +
         (l % kQuantGroup) * 4;
}

// Where the two high bits of row kq (0..7) sit in its crumb byte (the 6-bit nibble form).
inline int crumb_shift(int kq) {
  constexpr int kShift[4] = {4, 6, 0, 2};
  return kShift[kq % 4];
}

// The integer weight q of panel p, block b, column l, k-in-block i, in either form.
inline std::int32_t packed_weight(const QuantPacked& w, std::int64_t p, std::int64_t b,
                                  std::int64_t l, std::int64_t i) {
  if (!w.nibble) return w.qs[qs_offset(w.nb, p, b, l, i)];
  const auto* at =
      reinterpret_cast<const std::uint8_t*>(w.qs) + nibble_base(w.nb, w.planes, p, b, l);
  const int kq = static_cast<int>(i / 4), j = static_cast<int>(i % 4);
  std::int32_t u = (at[(kq / 2) * 64 + j] >> (4 * (kq % 2))) & 0x0F;
  if (w.planes == 1) u |= ((at[256 + j] >> kq) & 1) << 4;
  if (w.planes == 2) u |= ((at[256 + 64 * (kq / 4) + j] >> crumb_shift(kq)) & 3) << 4;
  return u - w.offset;
}

// Activations already quantized (QuantActs, linear_impl.h): m rows of k int8 q (row stride
// k), m rows of nb block scales d (row stride nb), m rows of 2 nb half sums xs
// (ref::act_half_sums; read only when reads_act_sums(w), may be null otherwise), and u, q's
// bytes + 128 as unsigned bytes (q ^ 0x80, the same layout; read only by a kernel for
// which qlinear_reads_shifted(isa) over the int8 form, may be null otherwise).
struct QuantRows {
  const std::int8_t* q = nullptr;
  const std::int8_t* u = nullptr;
  const float* d = nullptr;
  const std::int32_t* xs = nullptr;
  std::int64_t m = 0;
};

// y[r][j] for rows [0, x.m) and the columns of panels [p0, p1): the reference's fold
// (ref::quant_linear) over activations already quantized.
using QLinearFn = void (*)(const QuantPacked& w, const QuantRows& x, float* y, std::int64_t ldy,
                           std::int64_t p0, std::int64_t p1);

// Whether the kernel of `isa` reads QuantRows::u (the int8 form with vpdpbusd, whose
// unsigned operand is x + 128) for weights in the int8 form (w.nibble false).
bool qlinear_reads_shifted(Isa isa);
// u[i] = q[i] ^ 0x80 for i < n: q + 128 as unsigned bytes.
void shift_rows(const std::int8_t* q, std::int64_t n, std::int8_t* u);

// Activations quantized for the kernels: m rows of x (row stride ldx) to q (m rows of k
// int8, row stride k) and d (m rows of k / 32 block scales) by ref::quantize_act_row, and
// when xs is not null the half sums (m rows of k / 16, ref::act_half_sums). Every variant
// gives the reference's bytes.
using QuantizeActsFn = void (*)(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                                std::int8_t* q, float* d, std::int32_t* xs);
QuantizeActsFn quantize_acts_scalar();
QuantizeActsFn quantize_acts_avx2();  // only call when the CPU supports AVX2
// The quantizer of `isa` (the AVX2 one for AVX-512 too).
QuantizeActsFn quantize_acts_for(Isa isa);

QLinearFn qlinear_scalar();
QLinearFn qlinear_avx2();             // only call when the CPU supports AVX2
QLinearFn qlinear_avx512(bool vnni);  // only call when the CPU supports AVX-512 (+VNNI)
bool cpu_has_avx512_vnni();
// The kernel of `isa` (AVX-512 with VNNI when the CPU has it).
QLinearFn qlinear_for(Isa isa);

}  // namespace detinfer::kernels::cpu
