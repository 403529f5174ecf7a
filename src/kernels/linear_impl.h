// PackedLinear's private state, shared by linear.cpp (f32/bf16/f16 panels) and
// quant_linear.cpp (quantized panels). Internal to the kernels module.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/kernels.h"

namespace detinfer::kernels {

using cpu::AlignedFree;

// How a threaded linear splits its panels: `tasks` ranges, claimed by the pool's threads
// as they come free (a thread slowed by the other's memory traffic, or by waking late,
// then runs fewer). Range boundaries fall on multiples of cpu::kPanelGroup panels. Any
// split gives the same bits: panels are independent outputs.
struct PanelSplit {
  std::int64_t total = 0;  // panels
  std::int64_t tasks = 1;
  static std::int64_t groups(std::int64_t panels) {
    return (panels + cpu::kPanelGroup - 1) / cpu::kPanelGroup;
  }
  // First panel of range t (t = tasks: total).
  std::int64_t begin(std::int64_t t) const {
    return std::min(total, cpu::kPanelGroup * (groups(total) * t / tasks));
  }
};
inline PanelSplit split_panels(std::int64_t total, int threads) {
  // 8 ranges per thread. With one range per thread (and boundaries off the 4-panel
  // grid), a profile of 2-thread decode of the 0.5B shape spent 15.5% of its CPU time in
  // the pool waiting for the other thread; with 8, 10.9% (docs/performance.md,
  // "Thread pool"). Ranges sized by bytes (128-512 KiB) were no better.
  constexpr std::int64_t kTasksPerThread = 8;
  PanelSplit s;
  s.total = total;
  if (threads > 1)
    s.tasks = std::max<std::int64_t>(
        1, std::min<std::int64_t>(PanelSplit::groups(total), threads * kTasksPerThread));
  return s;
}

struct PackedLinear::Impl {
  std::unique_ptr<std::uint8_t[], AlignedFree> data;
  std::size_t data_bytes = 0;
  std::vector<float> bias;
  cpu::PackedWeights view;
  // Quantized weights (pack_quantized): quantized == true, the panels in quant; view then
  // carries n, k and panels only.
  bool quantized = false;
  cpu::QuantPanels quant;
};

// m rows of x (k columns, row stride ldx) quantized for the quantized kernels
// (cpu::quantize_acts_for(active_isa()), the reference's bytes) in a cpu::ThreadScratch:
// cpu::QuantRows q, d, with `sums` the half sums xs, with `shifted` u (q ^ 0x80, for a
// kernel that cpu::qlinear_reads_shifted). Built once per input by run / run_panels, and by
// run_linears and run_gate_up_silu for all their quantized linears together; the rows
// split over `pool`'s threads when given (rows are independent: the same bytes).
class QuantActs {
 public:
  QuantActs(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k, bool sums,
            bool shifted, core::ThreadPool* pool);
  const cpu::QuantRows& rows() const { return rows_; }
  std::int64_t m() const { return rows_.m; }
  std::int64_t k() const { return k_; }

 private:
  std::int64_t k_ = 0;
  cpu::ThreadScratch scratch_;
  cpu::QuantRows rows_;
};

// The QuantActs that several linears over the same x share: built when any of them is
// quantized (with the half sums when any reads them), else empty; empty too when the
// quantized ones differ in k (each then quantizes x itself).
std::unique_ptr<QuantActs> shared_quant_acts(const PackedLinear* const* ws, int count,
                                             const float* x, std::int64_t ldx, std::int64_t m,
                                             core::ThreadPool* pool);

// Quantized counterparts of run / run_panels / widen_row (quant_linear.cpp).
void quant_run(const PackedLinear::Impl& im, const float* x, std::int64_t ldx, std::int64_t m,
               float* y, std::int64_t ldy, core::ThreadPool* pool);
void quant_run_panels(const PackedLinear::Impl& im, const QuantActs& a, float* y, std::int64_t ldy,
                      std::int64_t p0, std::int64_t p1);
// x quantized as im's kernel reads it.
QuantActs quant_acts_for(const PackedLinear::Impl& im, const float* x, std::int64_t ldx,
                         std::int64_t m, core::ThreadPool* pool);
void quant_widen_row(const PackedLinear::Impl& im, std::int64_t j, float* dst);

}  // namespace detinfer::kernels
