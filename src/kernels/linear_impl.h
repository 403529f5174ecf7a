// PackedLinear's private state, shared by linear.cpp (f32/bf16/f16 panels) and
// quant_linear.cpp (quantized panels). Internal to the kernels module.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/kernels.h"

namespace detinfer::kernels {

struct AlignedFree {
  void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

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

// Bytes of the calling thread's scratch, grown as needed and kept up to kKeptBytes (16 MiB)
// for the next holder: a step quantizes the activations of a dozen linears per layer, and a
// fresh allocation each time cost page faults and malloc time (quant_linear.cpp). A need
// above kKeptBytes, or a second holder on the same thread, gets a buffer of its own.
class ThreadScratch {
 public:
  explicit ThreadScratch(std::size_t bytes);
  ~ThreadScratch();
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  std::uint8_t* data() const { return data_; }  // 64-byte aligned
  static constexpr std::size_t kKeptBytes = std::size_t{16} << 20;

 private:
  std::uint8_t* data_ = nullptr;
  bool kept_ = false;        // the thread's kept buffer (released to it on destruction)
  bool* release_ = nullptr;  // the kept buffer's held flag
  std::unique_ptr<std::uint8_t[], AlignedFree> own_;
};

// m rows of x (k columns, row stride ldx) quantized for the quantized kernels
// (cpu::quantize_acts_for(active_isa()), the reference's bytes) in a ThreadScratch: int8
// rows q (stride k), block scales d (stride k / 32), and with `sums` the half sums xs
// (stride k / 16; else null). Built once per input by run / run_panels, and by
// run_linears and run_gate_up_silu for all their quantized linears together.
class QuantActs {
 public:
  QuantActs(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k, bool sums);
  const std::int8_t* q = nullptr;
  const float* d = nullptr;
  const std::int32_t* xs = nullptr;
  std::int64_t m = 0, k = 0;

 private:
  ThreadScratch scratch_;
};

// The QuantActs that several linears over the same x share: built when any of them is
// quantized (with the half sums when any reads them), else empty; empty too when the
// quantized ones differ in k (each then quantizes x itself).
std::unique_ptr<QuantActs> shared_quant_acts(const PackedLinear* const* ws, int count,
                                             const float* x, std::int64_t ldx, std::int64_t m);

// Quantized counterparts of run / run_panels / widen_row (quant_linear.cpp).
void quant_run(const PackedLinear::Impl& im, const float* x, std::int64_t ldx, std::int64_t m,
               float* y, std::int64_t ldy, core::ThreadPool* pool);
void quant_run_panels(const PackedLinear::Impl& im, const QuantActs& a, float* y, std::int64_t ldy,
                      std::int64_t p0, std::int64_t p1);
void quant_widen_row(const PackedLinear::Impl& im, std::int64_t j, float* dst);

}  // namespace detinfer::kernels
