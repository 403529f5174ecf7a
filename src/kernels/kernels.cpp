// Dispatching layer of the canonical CPU kernels: widening conversions, ISA selection and
// the row ops. Every entry point computes the bits the scalar reference defines.
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reference/half_round.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels {

float bf16_to_f32(std::uint16_t bits) {
  const std::uint32_t u = half_round::bf16_widen_bits(bits);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t u = half_round::f16_widen_bits(h);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t f32_to_bf16_rne(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return half_round::bf16_from_bits(u);
}

std::uint16_t f32_to_f16_rne(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return half_round::f16_from_bits(u);
}

void round_to_dtype(const float* x, float* y, std::int64_t n, core::DType dtype) {
  switch (dtype) {
    case core::DType::kF32:
      if (x != y) std::memmove(y, x, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case core::DType::kBF16:
      for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(f32_to_bf16_rne(x[i]));
      return;
    case core::DType::kF16:
      for (std::int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(f32_to_f16_rne(x[i]));
      return;
  }
}

void store_as_dtype(const float* x, void* y, std::int64_t n, core::DType dtype) {
  switch (dtype) {
    case core::DType::kF32:
      std::memcpy(y, x, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case core::DType::kBF16:
      for (std::int64_t i = 0; i < n; ++i)
        static_cast<std::uint16_t*>(y)[i] = f32_to_bf16_rne(x[i]);
      return;
    case core::DType::kF16:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(y)[i] = f32_to_f16_rne(x[i]);
      return;
  }
}

// --- ISA selection ---------------------------------------------------------------

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  const core::CpuFeatures& f = core::cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return cpu::kHaveAvx2 && f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512:
      return cpu::kHaveAvx512 && f.avx512f && f.avx512vl && f.avx2 && f.fma && f.f16c;
  }
  return false;
}

namespace {

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa initial_isa() {
  const char* env = std::getenv("DETINFER_CPU_ISA");
  if (env == nullptr || *env == '\0') return best_isa();
  const std::string v = env;
  Isa isa;
  if (v == "scalar") {
    isa = Isa::kScalar;
  } else if (v == "avx2") {
    isa = Isa::kAvx2;
  } else if (v == "avx512") {
    isa = Isa::kAvx512;
  } else {
    fail(ErrorCode::kInvalidArgument, "DETINFER_CPU_ISA: expected scalar|avx2|avx512, got '", v,
         "'");
  }
  if (!isa_supported(isa))
    fail(ErrorCode::kUnsupported, "DETINFER_CPU_ISA=", v, ": this CPU cannot run it");
  return isa;
}

std::atomic<Isa>& isa_state() {
  static std::atomic<Isa> state{initial_isa()};
  return state;
}

}  // namespace

Isa active_isa() { return isa_state().load(std::memory_order_relaxed); }

void set_isa(Isa isa) {
  if (!isa_supported(isa))
    fail(ErrorCode::kUnsupported, "set_isa(", to_string(isa), "): this CPU cannot run it");
  isa_state().store(isa, std::memory_order_relaxed);
}

namespace cpu {
const IsaKernels& active_kernels() {
  switch (active_isa()) {
    case Isa::kAvx512:
      if constexpr (kHaveAvx512) return avx512_kernels();
      break;
    case Isa::kAvx2:
      if constexpr (kHaveAvx2) return avx2_kernels();
      break;
    case Isa::kScalar:
      break;
  }
  return scalar_kernels();
}
}  // namespace cpu

// --- elementwise / row ops -----------------------------------------------------------

float exp_f32(float x) { return ref::exp_f32(x); }
float log_f32(float x) { return ref::log_f32(x); }
float dot(const float* a, const float* b, std::int64_t k) {
  return cpu::active_kernels().dot(a, b, k);
}

// ref::sum with four chunks in flight (independent partials, folded in chunk order).
float sum(const float* x, std::int64_t n) {
  constexpr std::int64_t kC = ref::kChunk;
  float s = 0.0f;
  const std::int64_t full = n / kC;
  std::int64_t c = 0;
  for (; c + 4 <= full; c += 4) {
    const float* x0 = x + c * kC;
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    for (std::int64_t i = 0; i < kC; ++i) {
      p0 = p0 + x0[i];
      p1 = p1 + x0[kC + i];
      p2 = p2 + x0[2 * kC + i];
      p3 = p3 + x0[3 * kC + i];
    }
    s = s + p0;
    s = s + p1;
    s = s + p2;
    s = s + p3;
  }
  for (std::int64_t c0 = c * kC; c0 < n; c0 += kC) {
    const std::int64_t c1 = std::min(n, c0 + kC);
    float p = 0.0f;
    for (std::int64_t i = c0; i < c1; ++i) p = p + x[i];
    s = s + p;
  }
  return s;
}

void exp_n(const float* x, float* y, std::int64_t n) { cpu::active_kernels().exp(x, y, n); }

void mean_rows(const float* x, std::int64_t ldx, std::int64_t rows, std::int64_t n, float* y) {
  for (std::int64_t r = 0; r < rows; ++r) y[r] = sum(x + r * ldx, n) / static_cast<float>(n);
}

void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
              std::int64_t ldy, std::int64_t rows, std::int64_t n, core::ThreadPool* pool) {
  const cpu::DotFn dot_fn = cpu::active_kernels().dot;
  auto body = [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      // ref::rms_norm with the ISA's dot.
      const float* xr = x + r * ldx;
      float* yr = y + r * ldy;
      const float ss = dot_fn(xr, xr, n);
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
      for (std::int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * inv) * w[i];
    }
  };
  if (pool != nullptr && rows > 1) {
    pool->parallel_for(rows, 1, body);
  } else {
    body(0, rows);
  }
}

void silu_mul(const float* g, const float* u, float* out, std::int64_t n) {
  cpu::active_kernels().silu_mul(g, u, out, n);
}

void add(const float* a, const float* b, float* out, std::int64_t n) {
  cpu::active_kernels().add(a, b, out, n);
}

float max_value(const float* x, std::int64_t n) {
  if (n <= 0) fail(ErrorCode::kInvalidArgument, "max_value: n must be > 0, got ", n);
  return cpu::active_kernels().max_value(x, n);
}

void exp_sub(const float* x, float m, float* y, std::int64_t n) {
  cpu::active_kernels().exp_sub(x, m, y, n);
}

SoftmaxNorm softmax_norm(const float* x, float* e, std::int64_t n) {
  SoftmaxNorm norm;
  const cpu::IsaKernels& k = cpu::active_kernels();
  norm.max = k.max_value(x, n);
  k.exp_sub(x, norm.max, e, n);
  norm.sum = sum(e, n);
  norm.log_sum = ref::log_f32(norm.sum);
  return norm;
}

void softmax(const float* x, float* y, std::int64_t n) {
  if (n <= 0) return;
  const SoftmaxNorm norm = softmax_norm(x, y, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = y[i] / norm.sum;
}

void log_softmax(const float* x, float* y, std::int64_t n) {
  if (n <= 0) return;
  const SoftmaxNorm norm = softmax_norm(x, y, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = (x[i] - norm.max) - norm.log_sum;
}

float log_softmax_at(const float* x, std::int64_t n, std::int64_t i) {
  if (i < 0 || i >= n) fail(ErrorCode::kInvalidArgument, "log_softmax_at: index ", i, " of ", n);
  // Uninitialized scratch: every element is written before the sum reads it.
  const std::unique_ptr<float[]> e(new float[static_cast<std::size_t>(n)]);
  const SoftmaxNorm norm = softmax_norm(x, e.get(), n);
  return (x[i] - norm.max) - norm.log_sum;
}

std::int64_t argmax(const float* x, std::int64_t n) { return cpu::active_kernels().argmax(x, n); }

void rope(float* x, std::int64_t heads, std::int64_t ldx, std::int64_t d, const float* cos,
          const float* sin) {
  for (std::int64_t h = 0; h < heads; ++h) ref::rope(x + h * ldx, d, cos, sin);
}

}  // namespace detinfer::kernels
