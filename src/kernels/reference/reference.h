// numerics spec v1 as plain scalar C++: the definition every optimized kernel (CPU and
// CUDA) is tested against, bit for bit. docs/numerics.md describes the same operations
// in words; when the two disagree, this code wins and the doc is fixed.
//
// All arithmetic is binary32, round-to-nearest-even; every fma is an explicit std::fma;
// this file must be compiled with -ffp-contract=off (the build does so everywhere).
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace detinfer::kernels::ref {

// Length of a reduction chunk: every reduction is split into consecutive chunks of
// kChunk elements (the last may be shorter), each accumulated from +0 in order, and the
// chunk partials are then added in order to a running sum that starts at +0.
inline constexpr std::int64_t kChunk = 64;

float exp_f32(float x);
float log_f32(float x);

// Largest value, exact: m = x[0]; m = x[i] > m ? x[i] : m (NaNs after x[0] are skipped).
float max_value(const float* x, std::int64_t n);

// Chunked fma dot product and chunked plain sum.
float dot(const float* a, const float* b, std::int64_t k);
float sum(const float* x, std::int64_t n);

// y[m][j] = dot(x[m], w[j], k) (+ bias[j]); w is [n][k] f32 (already widened).
void linear(const float* x, std::int64_t ldx, std::int64_t m, const float* w, std::int64_t n,
            std::int64_t k, const float* bias, float* y, std::int64_t ldy);

// One row: r = 1 / sqrt(dot(x,x)/n + eps); y[i] = (x[i] * r) * w[i].
void rms_norm(const float* x, const float* w, float eps, float* y, std::int64_t n);

// out[i] = (g[i] / (1 + exp(-g[i]))) * u[i]
void silu_mul(const float* g, const float* u, float* out, std::int64_t n);

void softmax(const float* x, float* y, std::int64_t n);
void log_softmax(const float* x, float* y, std::int64_t n);

// Largest value, ties to the lowest index; a NaN throws Error(kInvalidArgument).
std::int64_t argmax(const float* x, std::int64_t n);

// One vector of length d (rotate_half convention), in place.
void rope(float* x, std::int64_t d, const float* cos, const float* sin);

// Attention of one query head vector q (head_dim floats) over keys [0, num_keys) of kv
// head `kv_head` in the paged cache; writes head_dim floats to out.
void attention_head(const float* q, std::int64_t num_keys, std::int64_t kv_head,
                    const PagedKvView& kv, float scale, float* out);

// The full kernels::attention contract (every row, every head), serially.
void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo);

// attention_head over keys [first_key, num_keys) only, folded from first_key on, each
// score soft-capped first when softcap > 0 (kernels::AttentionMask).
void attention_head_masked(const float* q, std::int64_t first_key, std::int64_t num_keys,
                           std::int64_t kv_head, const PagedKvView& kv, float scale, float softcap,
                           float* out);
void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                      const std::int64_t* num_keys, const AttentionMask& mask,
                      std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
                      std::int64_t ldo);
float tanh_f32(float x);
void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n);

// Offset (in elements) of token t's K (or V) vector of kv head h in a paged pool.
inline std::int64_t kv_offset(const PagedKvView& kv, std::int64_t t, std::int64_t h) {
  const std::int64_t block = kv.block_table[t / kv.block_size];
  const std::int64_t slot = t % kv.block_size;
  return (block * kv.block_size + slot) * (kv.num_kv_heads * kv.head_dim) + h * kv.head_dim;
}

// Element i of a pool of kv.kv_dtype, widened exactly to binary32.
inline float kv_value(const void* pool, const PagedKvView& kv, std::int64_t i) {
  switch (kv.kv_dtype) {
    case core::DType::kBF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(pool)[i]);
    case core::DType::kF16:
      return f16_to_f32(static_cast<const std::uint16_t*>(pool)[i]);
    case core::DType::kF32:
      break;
  }
  return static_cast<const float*>(pool)[i];
}

// Pointer to token t's K (or V) vector of kv head h in a paged pool of f32 elements.
inline const float* kv_row(const void* pool, const PagedKvView& kv, std::int64_t t,
                           std::int64_t h) {
  return static_cast<const float*>(pool) + kv_offset(kv, t, h);
}

}  // namespace detinfer::kernels::ref
