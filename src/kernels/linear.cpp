// PackedLinear: weight prepacking into column panels and the threaded dispatch of the
// per-ISA panel kernels. Threads split rows and column panels, never K.
#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/linear_impl.h"

namespace detinfer::kernels {

namespace {
// dst[(p*k + i) * kPanel + l] = W[p*kPanel + l][i]: the bits are copied unchanged
// (widening happens in the kernels).
template <typename T>
void pack_panels(const T* src, T* dst, std::int64_t n, std::int64_t k) {
  for (std::int64_t j = 0; j < n; ++j) {
    T* out = dst + (j / cpu::kPanel) * k * cpu::kPanel + j % cpu::kPanel;
    const T* row = src + j * k;
    for (std::int64_t i = 0; i < k; ++i) out[i * cpu::kPanel] = row[i];
  }
}

}  // namespace

PackedLinear::PackedLinear() = default;
PackedLinear::~PackedLinear() = default;
PackedLinear::PackedLinear(PackedLinear&&) noexcept = default;
PackedLinear& PackedLinear::operator=(PackedLinear&&) noexcept = default;

PackedLinear PackedLinear::pack(const void* weights, core::DType dtype, std::int64_t n,
                                std::int64_t k, const float* bias) {
  if (weights == nullptr) fail(ErrorCode::kInvalidArgument, "PackedLinear::pack: null weights");
  if (n <= 0 || k <= 0)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::pack: shape must be positive, got n=", n,
         " k=", k);
  if (dtype != core::DType::kF32 && dtype != core::DType::kBF16 && dtype != core::DType::kF16)
    fail(ErrorCode::kUnsupported, "PackedLinear::pack: dtype ", static_cast<int>(dtype));
  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  Impl& im = *out.impl_;
  const std::int64_t panels = (n + cpu::kPanel - 1) / cpu::kPanel;
  const std::size_t esize = core::dtype_size(dtype);
  im.data_bytes = static_cast<std::size_t>(panels * cpu::kPanel * k) * esize;
  im.data.reset(new (std::align_val_t{64}) std::uint8_t[im.data_bytes]);
  core::advise_huge_pages(im.data.get(), im.data_bytes);  // before the memset touches it
  std::memset(im.data.get(), 0, im.data_bytes);
  if (dtype == core::DType::kF32) {
    pack_panels(static_cast<const float*>(weights), reinterpret_cast<float*>(im.data.get()), n, k);
  } else {
    pack_panels(static_cast<const std::uint16_t*>(weights),
                reinterpret_cast<std::uint16_t*>(im.data.get()), n, k);
  }
  if (bias != nullptr) im.bias.assign(bias, bias + n);
  im.view.data = im.data.get();
  im.view.dtype = dtype;
  im.view.n = n;
  im.view.k = k;
  im.view.panels = panels;
  im.view.bias = im.bias.empty() ? nullptr : im.bias.data();
  return out;
}

std::int64_t PackedLinear::n() const { return impl_ ? impl_->view.n : 0; }
std::int64_t PackedLinear::k() const { return impl_ ? impl_->view.k : 0; }
core::DType PackedLinear::dtype() const { return impl_ ? impl_->view.dtype : core::DType::kF32; }
bool PackedLinear::quantized() const { return impl_ && impl_->quantized; }
QuantFormat PackedLinear::quant_format() const {
  return impl_ ? impl_->quant.view.format : QuantFormat::kQ8_0;
}
std::size_t PackedLinear::packed_bytes() const {
  return impl_ ? impl_->data_bytes + impl_->bias.size() * sizeof(float) + impl_->quant.bytes() : 0;
}

// The panel kernel over rows in blocks of kRowBlock: a panel's pass re-reads the block's
// activations, which then stay in the caches (a prompt prefilled in one step of 8192 rows
// otherwise streamed its 8192 x K activations from memory once per 64-column panel). Rows
// are independent, so the blocks give the same bits.
namespace {
constexpr std::int64_t kRowBlock = 256;
void run_row_blocks(cpu::LinearFn fn, const cpu::PackedWeights& w, const float* x, std::int64_t ldx,
                    std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  for (std::int64_t r = 0; r < m; r += kRowBlock)
    fn(w, x + r * ldx, ldx, std::min(kRowBlock, m - r), y + r * ldy, ldy, p0, p1);
}
}  // namespace

void PackedLinear::run(const float* x, std::int64_t ldx, std::int64_t m, float* y, std::int64_t ldy,
                       core::ThreadPool* pool) const {
  if (!impl_) fail(ErrorCode::kInvalidArgument, "PackedLinear::run on an empty PackedLinear");
  const cpu::PackedWeights& w = impl_->view;
  if (m <= 0) return;
  if (ldx < w.k || ldy < w.n)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::run: ldx=", ldx, " (k=", w.k, "), ldy=", ldy,
         " (n=", w.n, ")");
  if (impl_->quantized) {
    quant_run(*impl_, x, ldx, m, y, ldy, pool);
    return;
  }
  const cpu::LinearFn fn = cpu::active_kernels().linear;
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads <= 1) {
    run_row_blocks(fn, w, x, ldx, m, y, ldy, 0, w.panels);
    return;
  }
  // G panel ranges (split_panels: several per thread, claimed as threads come free; rows
  // inside the kernel), times R row ranges when there are fewer ranges than threads.
  // Rows never split a reduction, so any split gives the same bits.
  const PanelSplit split = split_panels(w.panels, threads);
  const std::int64_t groups = split.tasks;
  const std::int64_t row_parts = std::min<std::int64_t>(m, (threads + groups - 1) / groups);
  const std::int64_t tasks = groups * row_parts;
  pool->parallel_for(
      tasks, 1,
      [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int64_t g = t / row_parts;
          const std::int64_t r = t % row_parts;
          const std::int64_t r0 = m * r / row_parts, r1 = m * (r + 1) / row_parts;
          run_row_blocks(fn, w, x + r0 * ldx, ldx, r1 - r0, y + r0 * ldy, ldy, split.begin(g),
                         split.begin(g + 1));
        }
      },
      static_cast<int>(tasks));
}

}  // namespace detinfer::kernels

namespace detinfer::kernels {

void PackedLinear::widen_row(std::int64_t j, float* dst) const {
  if (!impl_ || j < 0 || j >= impl_->view.n)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::widen_row: row ", j, " of ", n());
  if (impl_->quantized) {
    quant_widen_row(*impl_, j, dst);
    return;
  }
  const cpu::PackedWeights& w = impl_->view;
  // Element i of row j sits at (panel * k + i) * kPanel + lane (see pack_panels).
  const std::int64_t base = (j / cpu::kPanel) * w.k * cpu::kPanel + j % cpu::kPanel;
  if (w.dtype == core::DType::kF32) {
    const float* src = static_cast<const float*>(w.data) + base;
    for (std::int64_t i = 0; i < w.k; ++i) dst[i] = src[i * cpu::kPanel];
    return;
  }
  const std::uint16_t* src = static_cast<const std::uint16_t*>(w.data) + base;
  if (w.dtype == core::DType::kBF16) {
    for (std::int64_t i = 0; i < w.k; ++i) dst[i] = bf16_to_f32(src[i * cpu::kPanel]);
  } else {
    for (std::int64_t i = 0; i < w.k; ++i) dst[i] = f16_to_f32(src[i * cpu::kPanel]);
  }
}

std::int64_t PackedLinear::panels() const { return impl_ ? impl_->view.panels : 0; }

void PackedLinear::run_panels(const float* x, std::int64_t ldx, std::int64_t m, float* y,
                              std::int64_t ldy, std::int64_t p0, std::int64_t p1) const {
  if (!impl_)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::run_panels on an empty PackedLinear");
  const cpu::PackedWeights& w = impl_->view;
  if (m <= 0 || p0 >= p1) return;
  if (p0 < 0 || p1 > w.panels || ldx < w.k || ldy < w.n)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::run_panels: panels [", p0, ", ", p1, ") of ",
         w.panels, ", ldx=", ldx, " (k=", w.k, "), ldy=", ldy, " (n=", w.n, ")");
  if (impl_->quantized) {
    quant_run_panels(*impl_, quant_acts_for(*impl_, x, ldx, m, nullptr), y, ldy, p0, p1);
    return;
  }
  run_row_blocks(cpu::active_kernels().linear, w, x, ldx, m, y, ldy, p0, p1);
}

void PackedLinear::run_panels(const QuantActs& acts, float* y, std::int64_t ldy, std::int64_t p0,
                              std::int64_t p1) const {
  if (!impl_ || !impl_->quantized)
    fail(ErrorCode::kInvalidArgument,
         "PackedLinear::run_panels: quantized rows need quantized weights");
  if (acts.m() <= 0 || p0 >= p1) return;
  if (p0 < 0 || p1 > impl_->view.panels || ldy < impl_->view.n)
    fail(ErrorCode::kInvalidArgument, "PackedLinear::run_panels: panels [", p0, ", ", p1, ") of ",
         impl_->view.panels, ", ldy=", ldy, " (n=", impl_->view.n, ")");
  quant_run_panels(*impl_, acts, y, ldy, p0, p1);
}

namespace {
// Panels [p0, p1) of w over x, or over `acts` (x quantized once for several linears) when
// w is quantized and acts is given.
void run_panels_of(const PackedLinear& w, const QuantActs* acts, const float* x, std::int64_t ldx,
                   std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  if (acts != nullptr && w.quantized()) {
    w.run_panels(*acts, y, ldy, p0, p1);
  } else {
    w.run_panels(x, ldx, m, y, ldy, p0, p1);
  }
}
}  // namespace

void run_linears(const LinearOut* outs, int count, const float* x, std::int64_t ldx, std::int64_t m,
                 core::ThreadPool* pool) {
  std::int64_t total = 0;
  for (int i = 0; i < count; ++i) total += outs[i].w->panels();
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (m <= 0 || total == 0) return;
  // Task t runs global panels [split.begin(t), split.begin(t + 1)) of the concatenation.
  const PanelSplit split = split_panels(total, threads);
  const std::int64_t tasks = split.tasks;
  std::vector<const PackedLinear*> ws(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) ws[static_cast<std::size_t>(i)] = outs[i].w;
  const std::unique_ptr<QuantActs> acts = shared_quant_acts(ws.data(), count, x, ldx, m, pool);
  auto body = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t g0 = split.begin(t), g1 = split.begin(t + 1);
      std::int64_t base = 0;
      for (int i = 0; i < count; ++i) {
        const std::int64_t n = outs[i].w->panels();
        const std::int64_t p0 = std::max(g0, base) - base, p1 = std::min(g1, base + n) - base;
        if (p0 < p1)
          run_panels_of(*outs[i].w, acts.get(), x, ldx, m, outs[i].y, outs[i].ldy, p0, p1);
        base += n;
      }
    }
  };
  if (pool != nullptr && tasks > 1) {
    pool->parallel_for(tasks, 1, body, static_cast<int>(tasks));
  } else {
    body(0, tasks);
  }
}

void run_gate_up_silu(const PackedLinear& gate, const PackedLinear& up, const float* x,
                      std::int64_t ldx, std::int64_t m, float* g, float* u, float* a,
                      core::ThreadPool* pool) {
  const std::int64_t n = gate.n();
  if (up.n() != n || up.k() != gate.k())
    fail(ErrorCode::kInvalidArgument, "run_gate_up_silu: gate is ", n, "x", gate.k(), ", up is ",
         up.n(), "x", up.k());
  if (m <= 0) return;
  const std::int64_t panels = gate.panels();
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  const PanelSplit split = split_panels(panels, threads);
  const std::int64_t tasks = split.tasks;
  const PackedLinear* ws[2] = {&gate, &up};
  const std::unique_ptr<QuantActs> acts = shared_quant_acts(ws, 2, x, ldx, m, pool);
  auto body = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t p0 = split.begin(t), p1 = split.begin(t + 1);
      run_panels_of(gate, acts.get(), x, ldx, m, g, n, p0, p1);
      run_panels_of(up, acts.get(), x, ldx, m, u, n, p0, p1);
      const std::int64_t c0 = p0 * cpu::kPanel, c1 = std::min(n, p1 * cpu::kPanel);
      for (std::int64_t r = 0; r < m; ++r)
        silu_mul(g + r * n + c0, u + r * n + c0, a + r * n + c0, c1 - c0);
    }
  };
  if (pool != nullptr && tasks > 1) {
    pool->parallel_for(tasks, 1, body, static_cast<int>(tasks));
  } else {
    body(0, tasks);
  }
}

}  // namespace detinfer::kernels
