// Scalar (baseline x86-64) kernels: the reference order over the packed layouts, with
// no SIMD. Used when DETINFER_CPU_ISA=scalar or the CPU lacks AVX2+FMA+F16C.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cpu {

namespace {

float widen(const PackedWeights& w, std::int64_t index) {
  switch (w.dtype) {
    case core::DType::kF32:
      return static_cast<const float*>(w.data)[index];
    case core::DType::kBF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(w.data)[index]);
    case core::DType::kF16:
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

// The reference's per-key and per-chunk sequences, one value at a time.
void attn_scores_scalar(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* S,
                        std::int64_t lds, float* mx, float* scratch) {
  const std::int64_t d = a.kv->head_dim;
  const std::int64_t kbase = a.kv_head * d;
  float* k = scratch;  // K row widened exactly (scratch holds at least d floats)
  for (std::int64_t g = 0; g < a.group; ++g) {
    float best = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = j0; j < j1; ++j) {
      for (std::int64_t c = 0; c < d; ++c)
        k[c] = ref::kv_value(a.kv->k_pool, *a.kv, kbase + a.off[j] + c);
      const float s = ref::dot(a.q + g * d, k, d) * a.scale;
      S[g * lds + j] = s;
      best = s > best ? s : best;
    }
    mx[g] = best;
  }
}

void attn_partials_scalar(const AttnHeads& a, float* S, std::int64_t lds, const float* m,
                          std::int64_t j0, std::int64_t j1, float* den, std::int64_t den_stride,
                          float* num, std::int64_t num_stride) {
  const std::int64_t d = a.kv->head_dim;
  const std::int64_t vbase = a.kv_head * d;
  const bool acc = den_stride == 0;
  for (std::int64_t k0 = j0, i = 0; k0 < j1; k0 += ref::kChunk, ++i) {
    const std::int64_t k1 = std::min(j1, k0 + ref::kChunk);
    for (std::int64_t g = 0; g < a.group; ++g) {
      float* e = S + g * lds;
      float p = 0.0f;
      for (std::int64_t j = k0; j < k1; ++j) {
        e[j] = ref::exp_f32(e[j] - m[g]);
        p = p + e[j];
      }
      float* dg = den + i * den_stride + g;
      *dg = acc ? *dg + p : p;
      for (std::int64_t c = 0; c < d; ++c) {
        float pc = 0.0f;
        for (std::int64_t j = k0; j < k1; ++j)
          pc = std::fma(e[j], ref::kv_value(a.kv->v_pool, *a.kv, vbase + a.off[j] + c), pc);
        float* o = num + i * num_stride + g * d + c;
        *o = acc ? *o + pc : pc;
      }
    }
  }
}

void attn_transpose_k_scalar(const AttnHeads&, std::int64_t, std::int64_t, float*) {}

void exp_scalar(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = ref::exp_f32(x[i]);
}

void exp_sub_scalar(const float* x, float m, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = ref::exp_f32(x[i] - m);
}

void add_scalar(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void silu_mul_scalar(const float* g, const float* u, float* out, std::int64_t n) {
  ref::silu_mul(g, u, out, n);
}

}  // namespace

const IsaKernels& scalar_kernels() {
  static const IsaKernels k{linear_scalar,           attn_scores_scalar, attn_partials_scalar,
                            attn_transpose_k_scalar, exp_scalar,         ref::dot,
                            silu_mul_scalar,         ref::argmax,        ref::max_value,
                            exp_sub_scalar,          add_scalar};
  return k;
}

}  // namespace detinfer::kernels::cpu
