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

// The activations of m rows quantized per block of 32 (ref::quantize_act_row).
struct QuantActs {
  std::vector<std::int8_t> q;
  std::vector<float> d;
  QuantActs(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k)
      : q(static_cast<std::size_t>(m * k)), d(static_cast<std::size_t>(m * (k / kQB))) {
    for (std::int64_t r = 0; r < m; ++r)
      ref::quantize_act_row(x + r * ldx, k, q.data() + r * k, d.data() + r * (k / kQB));
  }
};

cpu::QLinearFn active_qlinear() { return cpu::qlinear_for(active_isa()); }
}  // namespace

PackedLinear PackedLinear::pack_quantized(const void* blocks, QuantFormat format, std::int64_t n,
                                          std::int64_t k, const float* bias) {
  if (blocks == nullptr)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::pack_quantized: null blocks");
  if (n <= 0 || k <= 0)
    fail(ErrorCode::kInvalidArgument,
         "PackedLinear::pack_quantized: shape must be positive, got n=", n, " k=", k);
  const std::int64_t row_bytes = quant_row_bytes(format, k);  // checks k % 32
  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  Impl& im = *out.impl_;
  const std::int64_t panels = (n + cpu::kPanel - 1) / cpu::kPanel, nb = k / kQB;
  im.data_bytes = static_cast<std::size_t>(panels * cpu::kPanel * k);
  im.data.reset(new (std::align_val_t{64}) std::uint8_t[im.data_bytes]);
  std::memset(im.data.get(), 0, im.data_bytes);
  im.scales.assign(static_cast<std::size_t>(panels * cpu::kPanel * nb), 0.0f);
  im.wsums.assign(im.scales.size(), 0);
  auto* qs = reinterpret_cast<std::int8_t*>(im.data.get());
  for (std::int64_t j = 0; j < n; ++j) {
    const auto* row = static_cast<const std::uint8_t*>(blocks) + j * row_bytes;
    const std::int64_t p = j / cpu::kPanel, l = j % cpu::kPanel;
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::int64_t at = cpu::qd_index(nb, p, b, l);
      std::int8_t q[kQB];
      im.scales[static_cast<std::size_t>(at)] = ref::decode_block(format, row, b, q);
      std::int32_t sum = 0;
      for (std::int64_t i = 0; i < kQB; ++i) {
        qs[cpu::qs_offset(nb, p, b, l, i)] = q[i];
        sum += q[i];
      }
      im.wsums[static_cast<std::size_t>(at)] = sum;
    }
  }
  if (bias != nullptr) im.bias.assign(bias, bias + n);
  im.quantized = true;
  im.view.n = n;
  im.view.k = k;
  im.view.panels = panels;
  im.qview = cpu::QuantPacked{qs,
                              im.scales.data(),
                              im.wsums.data(),
                              format,
                              n,
                              k,
                              nb,
                              panels,
                              im.bias.empty() ? nullptr : im.bias.data()};
  return out;
}

void quant_run_panels(const PackedLinear::Impl& im, const float* x, std::int64_t ldx,
                      std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0,
                      std::int64_t p1) {
  const QuantActs a(x, ldx, m, im.qview.k);
  active_qlinear()(im.qview, a.q.data(), a.d.data(), m, y, ldy, p0, p1);
}

void quant_run(const PackedLinear::Impl& im, const float* x, std::int64_t ldx, std::int64_t m,
               float* y, std::int64_t ldy, core::ThreadPool* pool) {
  const cpu::QuantPacked& w = im.qview;
  const QuantActs a(x, ldx, m, w.k);
  const cpu::QLinearFn fn = active_qlinear();
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads <= 1) {
    fn(w, a.q.data(), a.d.data(), m, y, ldy, 0, w.panels);
    return;
  }
  // Panel ranges as PackedLinear::run splits them; columns are independent outputs.
  const PanelSplit split = split_panels(w.panels, threads);
  pool->parallel_for(
      split.tasks, 1,
      [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t)
          fn(w, a.q.data(), a.d.data(), m, y, ldy, split.begin(t), split.begin(t + 1));
      },
      static_cast<int>(split.tasks));
}

void quant_widen_row(const PackedLinear::Impl& im, std::int64_t j, float* dst) {
  const cpu::QuantPacked& w = im.qview;
  const std::int64_t p = j / cpu::kPanel, l = j % cpu::kPanel;
  for (std::int64_t b = 0; b < w.nb; ++b) {
    const std::int64_t at = cpu::qd_index(w.nb, p, b, l);
    const float d = w.d[at];
    for (std::int64_t i = 0; i < kQB; ++i)  // exact
      dst[b * kQB + i] = d * static_cast<float>(w.qs[cpu::qs_offset(w.nb, p, b, l, i)]);
  }
}

}  // namespace detinfer::kernels
