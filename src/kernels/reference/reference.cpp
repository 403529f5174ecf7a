// numerics spec v1, scalar reference (see reference.h). Readability over speed: each
// function is the literal definition of its op.
#include "kernels/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace detinfer::kernels::ref {

float dot(const float* a, const float* b, std::int64_t k) {
  float s = 0.0f;
  for (std::int64_t c0 = 0; c0 < k; c0 += kChunk) {
    const std::int64_t c1 = std::min(k, c0 + kChunk);
    float p = 0.0f;
    for (std::int64_t i = c0; i < c1; ++i) p = std::fma(a[i], b[i], p);
    s = s + p;
  }
  return s;
}

float sum(const float* x, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::int64_t c1 = std::min(n, c0 + kChunk);
    float p = 0.0f;
    for (std::int64_t i = c0; i < c1; ++i) p = p + x[i];
    s = s + p;
  }
  return s;
}

void linear(const float* x, std::int64_t ldx, std::int64_t m, const float* w, std::int64_t n,
            std::int64_t k, const float* bias, float* y, std::int64_t ldy) {
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      float v = dot(x + r * ldx, w + j * k, k);
      if (bias != nullptr) v = v + bias[j];
      y[r * ldy + j] = v;
    }
  }
}

void rms_norm(const float* x, const float* w, float eps, float* y, std::int64_t n) {
  const float ss = dot(x, x, n);
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (std::int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * w[i];
}

void silu_mul(const float* g, const float* u, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + exp_f32(-g[i])) * u[i];
}

float max_value(const float* x, std::int64_t n) {
  float m = x[0];
  for (std::int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

void softmax(const float* x, float* y, std::int64_t n) {
  if (n <= 0) return;
  const float m = max_value(x, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i] - m);
  const float s = sum(y, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = y[i] / s;
}

void log_softmax(const float* x, float* y, std::int64_t n) {
  if (n <= 0) return;
  const float m = max_value(x, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i] - m);
  const float ls = log_f32(sum(y, n));
  for (std::int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
}

std::int64_t argmax(const float* x, std::int64_t n) {
  if (n <= 0) fail(ErrorCode::kInvalidArgument, "argmax: n must be > 0, got ", n);
  std::int64_t best = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) fail(ErrorCode::kInvalidArgument, "argmax: NaN at index ", i);
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void rope(float* x, std::int64_t d, const float* cos, const float* sin) {
  const std::int64_t h = d / 2;
  for (std::int64_t i = 0; i < h; ++i) {
    const float a = x[i];
    const float b = x[i + h];
    x[i] = a * cos[i] - b * sin[i];
    x[i + h] = b * cos[i] + a * sin[i];
  }
}

void attention_head(const float* q, std::int64_t num_keys, std::int64_t kv_head,
                    const PagedKvView& kv, float scale, float* out) {
  const std::int64_t d = kv.head_dim;
  if (num_keys <= 0) {
    for (std::int64_t c = 0; c < d; ++c) out[c] = 0.0f;
    return;
  }
  std::vector<float> e(static_cast<std::size_t>(num_keys));
  std::vector<float> k(static_cast<std::size_t>(d));  // K row widened exactly
  for (std::int64_t j = 0; j < num_keys; ++j) {
    const std::int64_t off = kv_offset(kv, j, kv_head);
    for (std::int64_t c = 0; c < d; ++c) k[c] = kv_value(kv.k_pool, kv, off + c);
    e[j] = dot(q, k.data(), d) * scale;
  }
  const float m = max_value(e.data(), num_keys);
  for (std::int64_t j = 0; j < num_keys; ++j) e[j] = exp_f32(e[j] - m);
  const float den = sum(e.data(), num_keys);
  for (std::int64_t c = 0; c < d; ++c) {
    float s = 0.0f;
    for (std::int64_t j0 = 0; j0 < num_keys; j0 += kChunk) {
      const std::int64_t j1 = std::min(num_keys, j0 + kChunk);
      float p = 0.0f;
      for (std::int64_t j = j0; j < j1; ++j)
        p = std::fma(e[j], kv_value(kv.v_pool, kv, kv_offset(kv, j, kv_head) + c), p);
      s = s + p;
    }
    out[c] = s / den;
  }
}

void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo) {
  const std::int64_t group = num_heads / kv.num_kv_heads;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < num_heads; ++h) {
      attention_head(q + r * ldq + h * kv.head_dim, num_keys[r], h / group, kv, scale,
                     out + r * ldo + h * kv.head_dim);
    }
  }
}

}  // namespace detinfer::kernels::ref
