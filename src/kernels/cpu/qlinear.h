// Internal interface of the quantized linear (quantized spec v1): the packed layout and the
// per-ISA panel kernels. Activations are quantized once, in baseline code
// (ref::quantize_act_row), before any kernel runs, so every ISA reads the same int8 rows.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/quant.h"

namespace detinfer::kernels::cpu {

// Quantized weights repacked for the kernels: panels of kPanel (64) output columns; within
// panel p, block b (k = 32b .. 32b+31) of its 64 columns is contiguous:
//   qs + ((p * nb + b) * 64 + l) * 32   32 int8 weights of column p*64 + l,
//   d[(p * nb + b) * 64 + l]            that block's scale widened exactly to binary32.
// Columns past n hold zeros. Any format decodes to this int8 + scale form exactly.
struct QuantPacked {
  const std::int8_t* qs = nullptr;  // 64-byte aligned
  const float* d = nullptr;
  QuantFormat format = QuantFormat::kQ8_0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t nb = 0;      // k / 32
  std::int64_t panels = 0;  // ceil(n / 64)
  const float* bias = nullptr;
};

// y[r][j] for rows [0, m) and the columns of panels [p0, p1): the reference's fold
// (ref::quant_linear) over activations already quantized: xq holds m rows of k int8
// (row stride k), xd m rows of nb block scales (row stride nb).
using QLinearFn = void (*)(const QuantPacked& w, const std::int8_t* xq, const float* xd,
                           std::int64_t m, float* y, std::int64_t ldy, std::int64_t p0,
                           std::int64_t p1);

QLinearFn qlinear_scalar();
QLinearFn qlinear_avx2();             // only call when the CPU supports AVX2
QLinearFn qlinear_avx512(bool vnni);  // only call when the CPU supports AVX-512 (+VNNI)
bool cpu_has_avx512_vnni();
// The kernel of `isa` (AVX-512 with VNNI when the CPU has it).
QLinearFn qlinear_for(Isa isa);

}  // namespace detinfer::kernels::cpu
