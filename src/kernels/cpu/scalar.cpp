// Scalar (baseline x86-64) kernels: the reference order over the packed layouts, with
// no SIMD. Used when DETINFER_CPU_ISA=scalar or the CPU lacks AVX2+FMA+F16C.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cpu {

namespace {

float widen(const PackedWeights& w, std::int64_t index) {
  switch (w.dtype) {
    case DType::kF32:
      return static_cast<const float*>(w.data)[index];
    case DType::kBF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(w.data)[index]);
    case DType::kF16:
      return f16_to_f32(static_cast<const std::uint16_t*>(w.data)[index]);
  }
  return 0.0f;
}

void linear_scalar(const PackedWeights& w, const float* x, std::int64_t ldx, std::int64_t m,
                   float* y, std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  const std::int64_t k = w.k;
  for (std::int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * ldx;
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t base = p * k * kPanel;
      const std::int64_t lanes = std::min(kPanel, w.n - p * kPanel);
      for (std::int64_t l = 0; l < lanes; ++l) {
        float s = 0.0f;
        for (std::int64_t c0 = 0; c0 < k; c0 += ref::kChunk) {
          const std::int64_t c1 = std::min(k, c0 + ref::kChunk);
          float part = 0.0f;
          for (std::int64_t i = c0; i < c1; ++i)
            part = std::fma(xr[i], widen(w, base + i * kPanel + l), part);
          s = s + part;
        }
        const std::int64_t j = p * kPanel + l;
        if (w.bias != nullptr) s = s + w.bias[j];
        y[r * ldy + j] = s;
      }
    }
  }
}

void attention_scalar(const float* q, std::int64_t group, std::int64_t num_keys,
                      std::int64_t kv_head, const PagedKvView& kv,
                      const std::int64_t* /*token_offset*/, float scale, float* out,
                      float* /*scratch*/) {
  for (std::int64_t g = 0; g < group; ++g)
    ref::attention_head(q + g * kv.head_dim, num_keys, kv_head, kv, scale, out + g * kv.head_dim);
}

void exp_scalar(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = ref::exp_f32(x[i]);
}

}  // namespace

const IsaKernels& scalar_kernels() {
  static const IsaKernels k{linear_scalar, attention_scalar, exp_scalar, ref::dot};
  return k;
}

}  // namespace detinfer::kernels::cpu
