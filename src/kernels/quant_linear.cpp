// PackedLinear over quantized weights (quantized spec v1): decoding ggml blocks into the
// kernels' int8 panels, activation quantization, and the threaded dispatch of the per-ISA
// quantized panel kernels. Threads split column panels (and rows), never K.
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/linear_impl.h"
#include "kernels/reference/quant_blocks.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels {

namespace {
constexpr std::int64_t kQB = ref::kQuantBlock;

// The activations of m rows quantized per block of 32 (ref::quantize_act_row), with their
// half sums (ref::act_half_sums) when the weights have a min term.
struct QuantActs {
  std::vector<std::int8_t> q;
  std::vector<float> d;
  std::vector<std::int32_t> xs;
  QuantActs(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k, bool sums)
      : q(static_cast<std::size_t>(m * k)), d(static_cast<std::size_t>(m * (k / kQB))) {
    if (sums) xs.resize(static_cast<std::size_t>(m * (k / 16)));
    for (std::int64_t r = 0; r < m; ++r) {
      ref::quantize_act_row(x + r * ldx, k, q.data() + r * k, d.data() + r * (k / kQB));
      if (sums) ref::act_half_sums(q.data() + r * k, k, xs.data() + r * (k / 16));
    }
  }
  const std::int32_t* sums() const { return xs.empty() ? nullptr : xs.data(); }
};

cpu::QLinearFn active_qlinear() { return cpu::qlinear_for(active_isa()); }
}  // namespace

namespace cpu {

QuantPanels pack_quant_panels(const void* blocks, QuantFormat format, std::int64_t n,
                              std::int64_t k, const float* bias, core::ThreadPool* pool) {
  const std::int64_t row_bytes = quant_row_bytes(format, k);  // checks k
  const QuantFormatInfo info = quant_format_info(format);
  const std::int64_t panels = (n + kPanel - 1) / kPanel, nb = k / kQB;
  const auto cells = static_cast<std::size_t>(panels * kPanel * nb);
  QuantPanels out;
  out.storage.assign(static_cast<std::size_t>(panels * kPanel * k + 64), 0);
  std::int8_t* qs =
      out.storage.data() + (64 - reinterpret_cast<std::uintptr_t>(out.storage.data()) % 64) % 64;
  const bool ext = info.sub_scaled || info.has_min;
  // 16-weight sub-blocks: the halves of a 32-weight block have their own scales.
  const bool split =
      format == QuantFormat::kQ2_K || format == QuantFormat::kQ3_K || format == QuantFormat::kQ6_K;
  out.d.assign(cells, 0.0f);
  out.wsum.assign(cells, 0);
  if (ext) out.sm.assign(cells, 0);
  if (split) out.wsum_hi.assign(cells, 0);
  if (info.has_min) out.dm.assign(cells, 0.0f);
  const auto decode_row = [&](std::int64_t j) {
    const auto* row = static_cast<const std::uint8_t*>(blocks) + j * row_bytes;
    const std::int64_t p = j / kPanel, l = j % kPanel;
    for (std::int64_t b = 0; b < nb; ++b) {
      const auto at = static_cast<std::size_t>(qd_index(nb, p, b, l));
      std::int8_t q[kQB];
      const ref::BlockScales s = ref::decode_block(format, row, b, q);
      std::int32_t sum[2] = {0, 0};
      for (std::int64_t i = 0; i < kQB; ++i) {
        qs[qs_offset(nb, p, b, l, i)] = q[i];
        sum[i / 16] += q[i];
      }
      out.d[at] = s.d;
      out.wsum[at] = split ? sum[0] : sum[0] + sum[1];
      if (split) out.wsum_hi[at] = sum[1];
      if (ext) {
        DETINFER_INTERNAL_CHECK(split || (s.s[0] == s.s[1] && s.m[0] == s.m[1]));
        out.sm[at] = pack_sm(s.s, s.m);  // every sub-scale and min is within int8
      }
      if (info.has_min) out.dm[at] = s.dm;
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
  QuantPacked& v = out.view;
  v = QuantPacked{qs, out.d.data(), out.wsum.data(), format, n, k, nb, panels, bias};
  v.ext = ext;
  v.split = split;
  v.has_min = info.has_min;
  if (ext) v.sm = out.sm.data();
  if (split) v.wsum_hi = out.wsum_hi.data();
  if (info.has_min) v.dm = out.dm.data();
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

void quant_run_panels(const PackedLinear::Impl& im, const float* x, std::int64_t ldx,
                      std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0,
                      std::int64_t p1) {
  const cpu::QuantPacked& w = im.quant.view;
  const QuantActs a(x, ldx, m, w.k, w.has_min);
  active_qlinear()(w, a.q.data(), a.d.data(), a.sums(), m, y, ldy, p0, p1);
}

void quant_run(const PackedLinear::Impl& im, const float* x, std::int64_t ldx, std::int64_t m,
               float* y, std::int64_t ldy, core::ThreadPool* pool) {
  const cpu::QuantPacked& w = im.quant.view;
  const QuantActs a(x, ldx, m, w.k, w.has_min);
  const cpu::QLinearFn fn = active_qlinear();
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads <= 1) {
    fn(w, a.q.data(), a.d.data(), a.sums(), m, y, ldy, 0, w.panels);
    return;
  }
  // Panel ranges as PackedLinear::run splits them; columns are independent outputs.
  const PanelSplit split = split_panels(w.panels, threads);
  pool->parallel_for(
      split.tasks, 1,
      [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t)
          fn(w, a.q.data(), a.d.data(), a.sums(), m, y, ldy, split.begin(t), split.begin(t + 1));
      },
      static_cast<int>(split.tasks));
}

void quant_widen_row(const PackedLinear::Impl& im, std::int64_t j, float* dst) {
  const cpu::QuantPacked& w = im.quant.view;
  const std::int64_t p = j / cpu::kPanel, l = j % cpu::kPanel;
  for (std::int64_t b = 0; b < w.nb; ++b) {
    const std::int64_t at = cpu::qd_index(w.nb, p, b, l);
    for (std::int64_t i = 0; i < kQB; ++i) {  // ref::dequantize_block's formula
      const std::int32_t q = w.qs[cpu::qs_offset(w.nb, p, b, l, i)];
      const std::int32_t s = !w.ext ? 1 : cpu::sm_byte(w.sm[at], i < 16 ? 0 : 1);
      const float v = w.d[at] * static_cast<float>(s * q);  // exact
      dst[b * kQB + i] =
          w.has_min ? v - w.dm[at] * static_cast<float>(cpu::sm_byte(w.sm[at], i < 16 ? 2 : 3)) : v;
    }
  }
}

}  // namespace detinfer::kernels
