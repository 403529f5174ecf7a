// PackedLinear over quantized weights (quantized spec v1): decoding ggml blocks into the
// kernels' int8 panels, activation quantization (QuantActs, once per input, in a
// ThreadScratch), and the threaded dispatch of the per-ISA quantized panel kernels.
// Threads split column panels (and rows), never K.
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/linear_impl.h"
#include "kernels/reference/quant_blocks.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels {

namespace {
constexpr std::int64_t kQB = ref::kQuantBlock;

cpu::QLinearFn active_qlinear() { return cpu::qlinear_for(active_isa()); }

// Whether the active kernel reads the shifted rows (QuantRows::u) for w.
bool reads_shifted(const cpu::QuantPacked& w) {
  return !w.nibble && cpu::qlinear_reads_shifted(active_isa());
}

std::size_t align64(std::size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

QuantActs::QuantActs(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k, bool sums,
                     bool shifted, core::ThreadPool* pool)
    : k_(k),
      scratch_(align64(static_cast<std::size_t>(m * k)) * (shifted ? 2 : 1) +
               align64(static_cast<std::size_t>(m * (k / kQB)) * sizeof(float)) +
               (sums ? static_cast<std::size_t>(m * (k / 16)) * sizeof(std::int32_t) : 0)) {
  const std::size_t q_bytes = align64(static_cast<std::size_t>(m * k));
  std::uint8_t* at = scratch_.data();
  auto* qb = reinterpret_cast<std::int8_t*>(at);
  auto* ub = shifted ? reinterpret_cast<std::int8_t*>(at + q_bytes) : nullptr;
  at += q_bytes * (shifted ? 2 : 1);
  auto* db = reinterpret_cast<float*>(at);
  at += align64(static_cast<std::size_t>(m * (k / kQB)) * sizeof(float));
  auto* sb = sums ? reinterpret_cast<std::int32_t*>(at) : nullptr;
  const cpu::QuantizeActsFn quantize = cpu::quantize_acts_for(active_isa());
  const std::int64_t nb = k / kQB;
  const auto rows = [&](std::int64_t r0, std::int64_t r1) {
    quantize(x + r0 * ldx, ldx, r1 - r0, k, qb + r0 * k, db + r0 * nb,
             sb != nullptr ? sb + r0 * 2 * nb : nullptr);
    if (ub != nullptr) cpu::shift_rows(qb + r0 * k, (r1 - r0) * k, ub + r0 * k);
  };
  // Serial up to 8 rows: a decode step's rows quantize faster than the pool wakes.
  if (pool != nullptr && pool->num_threads() > 1 && m > 8) {
    pool->parallel_for(m, 4, rows);
  } else {
    rows(0, m);
  }
  rows_ = cpu::QuantRows{qb, ub, db, sb, m};
}

std::unique_ptr<QuantActs> shared_quant_acts(const PackedLinear* const* ws, int count,
                                             const float* x, std::int64_t ldx, std::int64_t m,
                                             core::ThreadPool* pool) {
  bool any = false, sums = false, shifted = false;
  std::int64_t k = 0;
  for (int i = 0; i < count; ++i) {
    if (!ws[i]->quantized()) continue;
    if (any && ws[i]->k() != k) return nullptr;  // each quantizes its own rows
    any = true;
    k = ws[i]->k();
    const cpu::QuantPacked& w = ws[i]->impl().quant.view;
    sums = sums || cpu::reads_act_sums(w);
    shifted = shifted || reads_shifted(w);
  }
  return any ? std::make_unique<QuantActs>(x, ldx, m, k, sums, shifted, pool) : nullptr;
}

namespace cpu {

NibbleForm nibble_form(QuantFormat f) {
  switch (f) {
    case QuantFormat::kQ4_0:
      return {8, 0};  // q in [-8, 7]
    case QuantFormat::kQ3_K:
      return {4, 0};  // q in [-4, 3]
    case QuantFormat::kQ4_1:
    case QuantFormat::kQ4_K:
    case QuantFormat::kQ2_K:
      return {0, 0};  // q in [0, 15] (q2_k: [0, 3])
    case QuantFormat::kQ5_0:
      return {16, 1};  // q in [-16, 15]
    case QuantFormat::kQ5_1:
    case QuantFormat::kQ5_K:
      return {0, 1};  // q in [0, 31]
    case QuantFormat::kQ6_K:
      return {32, 2};  // q in [-32, 31]
    default:
      return {};  // q8_0
  }
}

namespace {

// The binary16 bits of a scale that decode_block widened from binary16 (d and dm of every
// format): narrowing gives back bits that widen to the same binary32 (NaNs included).
std::uint16_t f16_bits_of(float widened) {
  const std::uint16_t h = f32_to_f16_rne(widened);
  std::uint32_t a, b;
  const float back = f16_to_f32(h);
  std::memcpy(&a, &widened, 4);
  std::memcpy(&b, &back, 4);
  DETINFER_INTERNAL_CHECK(a == b);
  return h;
}

// 16-weight sub-blocks: the halves of a 32-weight block have their own scales.
bool split_format(QuantFormat f) {
  return f == QuantFormat::kQ2_K || f == QuantFormat::kQ3_K || f == QuantFormat::kQ6_K;
}

// The view of `out`'s arrays, its flags from the format.
void set_view(QuantPanels& out, std::int8_t* qs, QuantFormat format, std::int64_t n, std::int64_t k,
              const float* bias, NibbleForm form) {
  const QuantFormatInfo info = quant_format_info(format);
  QuantPacked& v = out.view;
  v = QuantPacked{qs,
                  out.d.data(),
                  out.wsum.empty() ? nullptr : out.wsum.data(),
                  format,
                  n,
                  k,
                  k / kQB,
                  (n + kPanel - 1) / kPanel,
                  bias};
  v.ext = info.sub_scaled || info.has_min;
  v.split = split_format(format);
  v.has_min = info.has_min;
  v.nibble = form.offset >= 0;
  v.offset = v.nibble ? form.offset : 0;
  v.planes = v.nibble ? form.planes : 0;
  if (v.ext) v.sm = out.sm.data();
  if (v.split && v.has_min) v.mm = out.mm.data();
  if (v.split && !v.nibble) v.wsum_hi = out.wsum_hi.data();
  if (v.has_min) v.dm = out.dm.data();
  // A K format's d and dm are its super-block's: one cell per 8 blocks.
  for (std::int64_t b = info.block_elems / kQB; b > 1; b /= 2) ++v.dshift;
}

// Stores q at panel p, block b, column l, k-in-block i of the nibble form (zeroed before).
void set_nibble_weight(std::int8_t* qs, const QuantPacked& v, std::int64_t p, std::int64_t b,
                       std::int64_t l, std::int64_t i, std::int32_t q) {
  const std::int32_t u = q + v.offset;
  DETINFER_INTERNAL_CHECK(u >= 0 && u < (16 << v.planes));
  auto* at = reinterpret_cast<std::uint8_t*>(qs) + nibble_base(v.nb, v.planes, p, b, l);
  const int kq = static_cast<int>(i / 4), j = static_cast<int>(i % 4);
  at[(kq / 2) * 64 + j] |= static_cast<std::uint8_t>((u & 0x0F) << (4 * (kq % 2)));
  if (v.planes == 1) at[256 + j] |= static_cast<std::uint8_t>(((u >> 4) & 1) << kq);
  if (v.planes == 2)  // the crumb rows (cpu/qlinear.h)
    at[256 + 64 * (kq / 4) + j] |= static_cast<std::uint8_t>(((u >> 4) & 3) << crumb_shift(kq));
}

}  // namespace

QuantPanels pack_quant_panels(const void* blocks, QuantFormat format, std::int64_t n,
                              std::int64_t k, const float* bias, core::ThreadPool* pool,
                              bool nibble) {
  const std::int64_t row_bytes = quant_row_bytes(format, k);  // checks k
  const std::int64_t panels = (n + kPanel - 1) / kPanel, nb = k / kQB;
  const auto cells = static_cast<std::size_t>(panels * kPanel * nb);
  const NibbleForm form = nibble ? nibble_form(format) : NibbleForm{};
  const std::int64_t bits = form.offset >= 0 ? 4 + form.planes : 8;
  QuantPanels out;
  core::assign_huge(out.storage, static_cast<std::size_t>(panels * kPanel * k * bits / 8 + 64),
                    0);  // QuantPacked::qs_bytes() and the alignment
  std::int8_t* qs =
      out.storage.data() + (64 - reinterpret_cast<std::uintptr_t>(out.storage.data()) % 64) % 64;
  const QuantFormatInfo info = quant_format_info(format);
  const auto dm_cells = static_cast<std::size_t>(panels * kPanel * nb * kQB / info.block_elems);
  core::assign_huge(out.d, dm_cells, 0);
  if (info.sub_scaled || info.has_min) core::assign_huge(out.sm, cells, 0);
  if (split_format(format) && info.has_min) core::assign_huge(out.mm, cells, 0);
  if (info.has_min) core::assign_huge(out.dm, dm_cells, 0);
  if (form.offset < 0) core::assign_huge(out.wsum, cells, 0);
  if (form.offset < 0 && split_format(format)) core::assign_huge(out.wsum_hi, cells, 0);
  set_view(out, qs, format, n, k, bias, form);
  const QuantPacked& v = out.view;
  const auto decode_row = [&](std::int64_t j) {
    const auto* row = static_cast<const std::uint8_t*>(blocks) + j * row_bytes;
    const std::int64_t p = j / kPanel, l = j % kPanel;
    for (std::int64_t b = 0; b < nb; ++b) {
      const auto at = static_cast<std::size_t>(qd_index(nb, p, b, l));
      const auto atd = static_cast<std::size_t>(qdm_index(v, p, b, l));
      std::int8_t q[kQB];
      const ref::BlockScales s = ref::decode_block(format, row, b, q);
      std::int32_t sum[2] = {0, 0};
      for (std::int64_t i = 0; i < kQB; ++i) {
        sum[i / 16] += q[i];
        if (!v.nibble) {
          qs[qs_offset(nb, p, b, l, i)] = q[i];
          continue;
        }
        set_nibble_weight(qs, v, p, b, l, i, q[i]);
      }
      // The super-block's blocks share d and dm: the first writes them, the others agree.
      const std::uint16_t d_bits = f16_bits_of(s.d), dm_bits = v.has_min ? f16_bits_of(s.dm) : 0;
      DETINFER_INTERNAL_CHECK(b % (std::int64_t{1} << v.dshift) == 0 ||
                              (out.d[atd] == d_bits && (!v.has_min || out.dm[atd] == dm_bits)));
      out.d[atd] = d_bits;
      // |sum| <= 32 * 128: exact in int16.
      if (!v.nibble) out.wsum[at] = static_cast<std::int16_t>(v.split ? sum[0] : sum[0] + sum[1]);
      if (!v.nibble && v.split) out.wsum_hi[at] = static_cast<std::int16_t>(sum[1]);
      if (v.ext) {  // every sub-scale and min is within int8
        DETINFER_INTERNAL_CHECK(v.split || (s.s[0] == s.s[1] && s.m[0] == s.m[1]));
        out.sm[at] = pack_sm(s.s[0], v.split ? s.s[1] : s.m[0]);
        if (v.split && v.has_min) out.mm[at] = pack_sm(s.m[0], s.m[1]);
      }
      if (v.has_min) out.dm[atd] = dm_bits;
    }
  };
  const auto decode_panels = [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t j = p0 * kPanel; j < std::min(n, p1 * kPanel); ++j) decode_row(j);
  };
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->parallel_for(panels, 1, decode_panels, 4 * pool->num_threads());
  } else {
    decode_panels(0, panels);
  }
  return out;
}

}  // namespace cpu

PackedLinear PackedLinear::pack_quantized(const void* blocks, QuantFormat format, std::int64_t n,
                                          std::int64_t k, const float* bias,
                                          core::ThreadPool* pool) {
  if (blocks == nullptr)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::pack_quantized: null blocks");
  if (n <= 0 || k <= 0)
    fail(ErrorCode::kInvalidArgument,
         "PackedLinear::pack_quantized: shape must be positive, got n=", n, " k=", k);
  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  Impl& im = *out.impl_;
  if (bias != nullptr) im.bias.assign(bias, bias + n);
  im.quant = cpu::pack_quant_panels(blocks, format, n, k,
                                    im.bias.empty() ? nullptr : im.bias.data(), pool);
  im.quantized = true;
  im.view.n = n;
  im.view.k = k;
  im.view.panels = im.quant.view.panels;
  return out;
}

void quant_run_panels(const PackedLinear::Impl& im, const QuantActs& a, float* y, std::int64_t ldy,
                      std::int64_t p0, std::int64_t p1) {
  const cpu::QuantPacked& w = im.quant.view;
  const cpu::QuantRows& x = a.rows();
  DETINFER_INTERNAL_CHECK(a.k() == w.k && (x.xs != nullptr || !cpu::reads_act_sums(w)) &&
                          (x.u != nullptr || !reads_shifted(w)));
  active_qlinear()(w, x, y, ldy, p0, p1);
}

QuantActs quant_acts_for(const PackedLinear::Impl& im, const float* x, std::int64_t ldx,
                         std::int64_t m, core::ThreadPool* pool) {
  const cpu::QuantPacked& w = im.quant.view;
  return QuantActs(x, ldx, m, w.k, cpu::reads_act_sums(w), reads_shifted(w), pool);
}

void quant_run(const PackedLinear::Impl& im, const float* x, std::int64_t ldx, std::int64_t m,
               float* y, std::int64_t ldy, core::ThreadPool* pool) {
  const cpu::QuantPacked& w = im.quant.view;
  const QuantActs a = quant_acts_for(im, x, ldx, m, pool);
  const cpu::QLinearFn fn = active_qlinear();
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads <= 1) {
    fn(w, a.rows(), y, ldy, 0, w.panels);
    return;
  }
  // Panel ranges as PackedLinear::run splits them; columns are independent outputs.
  const PanelSplit split = split_panels(w.panels, threads);
  pool->parallel_for(
      split.tasks, 1,
      [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t)
          fn(w, a.rows(), y, ldy, split.begin(t), split.begin(t + 1));
      },
      static_cast<int>(split.tasks));
}

void quant_widen_row(const PackedLinear::Impl& im, std::int64_t j, float* dst) {
  const cpu::QuantPacked& w = im.quant.view;
  const std::int64_t p = j / cpu::kPanel, l = j % cpu::kPanel;
  for (std::int64_t b = 0; b < w.nb; ++b) {
    const std::int64_t at = cpu::qd_index(w.nb, p, b, l), atd = cpu::qdm_index(w, p, b, l);
    for (std::int64_t i = 0; i < kQB; ++i) {  // ref::dequantize_block's formula
      const int h = i < 16 ? 0 : 1;
      const std::int32_t q = cpu::packed_weight(w, p, b, l, i);
      const float v =
          f16_to_f32(w.d[atd]) * static_cast<float>(cpu::packed_sub_scale(w, at, h) * q);
      dst[b * kQB + i] =
          w.has_min ? v - f16_to_f32(w.dm[atd]) * static_cast<float>(cpu::packed_sub_min(w, at, h))
                    : v;  // the products are exact
    }
  }
}

}  // namespace detinfer::kernels
