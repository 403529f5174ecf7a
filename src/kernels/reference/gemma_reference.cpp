// The scalar reference of the Gemma ops and of masked (sliding-window, soft-capped)
// attention (numerics spec v1, docs/numerics.md "tanh" and "Attention").
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/reference.h"
#include "kernels/reference/tanh_hd.h"

namespace detinfer::kernels::ref {

float tanh_f32(float x) { return explog::tanh_f32(x); }

void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = explog::gelu_tanh_f32(g[i]) * u[i];
}

void attention_head_masked(const float* q, std::int64_t first_key, std::int64_t num_keys,
                           std::int64_t kv_head, const PagedKvView& kv, float scale, float softcap,
                           float* out) {
  const std::int64_t d = kv.head_dim;
  const std::int64_t n = num_keys - first_key;  // visible keys
  if (n <= 0) {
    for (std::int64_t c = 0; c < d; ++c) out[c] = 0.0f;
    return;
  }
  // e[i] is key first_key + i: the visible keys are the sequence, from its first on.
  std::vector<float> e(static_cast<std::size_t>(n));
  std::vector<float> k(static_cast<std::size_t>(d));  // K row widened exactly
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t off = kv_offset(kv, first_key + i, kv_head);
    for (std::int64_t c = 0; c < d; ++c) k[c] = kv_value(kv.k_pool, kv, off + c);
    e[i] = dot(q, k.data(), d) * scale;
    if (softcap > 0.0f) e[i] = explog::softcap_f32(e[i], softcap);
  }
  const float m = max_value(e.data(), n);
  for (std::int64_t i = 0; i < n; ++i) e[i] = exp_f32(e[i] - m);
  const float den = sum(e.data(), n);
  for (std::int64_t c = 0; c < d; ++c) {
    float s = 0.0f;
    for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const std::int64_t i1 = std::min(n, i0 + kChunk);
      float p = 0.0f;
      for (std::int64_t i = i0; i < i1; ++i)
        p = std::fma(e[i], kv_value(kv.v_pool, kv, kv_offset(kv, first_key + i, kv_head) + c), p);
      s = s + p;
    }
    out[c] = s / den;
  }
}

void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                      const std::int64_t* num_keys, const AttentionMask& mask,
                      std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
                      std::int64_t ldo) {
  const std::int64_t group = num_heads / kv.num_kv_heads;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t first = mask.first_keys != nullptr ? mask.first_keys[r] : 0;
    for (std::int64_t h = 0; h < num_heads; ++h) {
      attention_head_masked(q + r * ldq + h * kv.head_dim, first, num_keys[r], h / group, kv, scale,
                            mask.softcap, out + r * ldo + h * kv.head_dim);
    }
  }
}

}  // namespace detinfer::kernels::ref
