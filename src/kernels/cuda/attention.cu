// Paged-KV attention on the GPU: the canonical kernel (spec v1, bitwise = the reference)
// and the device-invariant split kernel (fixed split SIZE over keys).
//
// Both process keys in tiles of 64 that coincide with the spec's reduction chunks, so a
// tile's exp values, its partial of the denominator (one thread, in key order) and its
// partials of the numerators (thread c for output c, in key order) are exactly the
// reference's chunk partials; the running sums then add them in chunk order.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace detinfer::kernels::cuda {

namespace {

struct AttentionArgs {
  const float* q;
  std::int64_t ldq;
  const std::int64_t* num_keys;
  std::int64_t num_heads;
  PagedKvView kv;
  float scale;
  float* out;
  std::int64_t ldo;
};

// ref::kv_row.
__device__ __forceinline__ const float* kv_row(const float* pool, const PagedKvView& kv,
                                               std::int64_t t, std::int64_t h) {
  const std::int64_t block = kv.block_table[t / kv.block_size];
  const std::int64_t slot = t % kv.block_size;
  return pool + (block * kv.block_size + slot) * (kv.num_kv_heads * kv.head_dim) + h * kv.head_dim;
}

// dot(q, k[t], d) * scale with the spec's chunked order (q staged in shared memory).
__device__ __forceinline__ float score(const float* qs, const PagedKvView& kv, std::int64_t t,
                                       std::int64_t h, float scale) {
  const float* k = kv_row(kv.k_pool, kv, t, h);
  const std::int64_t d = kv.head_dim;
  float s = 0.0f;
  for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
    const std::int64_t c1 = dmin(d, c0 + kChunk);
    float p = 0.0f;
    for (std::int64_t i = c0; i < c1; ++i) p = dm::fma_rn(qs[i], k[i], p);
    s = s + p;
  }
  return s * scale;
}

// Softmax-weighted sums over keys [a, b) (a a multiple of 64) given the max m: thread 0
// returns the denominator in *den, thread c < d its numerator in *num.
__device__ void attend_range(const float* qs, const PagedKvView& kv, std::int64_t h, float scale,
                             std::int64_t a, std::int64_t b, float m, float* den, float* num) {
  __shared__ float e[kChunk];
  const std::int64_t d = kv.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  float dsum = 0.0f;
  float nsum = 0.0f;
  for (std::int64_t j0 = a; j0 < b; j0 += kChunk) {
    const int len = static_cast<int>(dmin(kChunk, b - j0));
    if (tid < len) e[tid] = dm::exp_f32(score(qs, kv, j0 + tid, h, scale) - m);
    __syncthreads();
    if (tid == 0) {
      float p = 0.0f;
      for (int j = 0; j < len; ++j) p = p + e[j];
      dsum = dsum + p;
    }
    if (tid < d) {
      float p = 0.0f;
      for (int j = 0; j < len; ++j) p = dm::fma_rn(e[j], kv_row(kv.v_pool, kv, j0 + j, h)[tid], p);
      nsum = nsum + p;
    }
    __syncthreads();
  }
  *den = dsum;
  *num = nsum;
}

struct RowHead {
  std::int64_t r;
  std::int64_t h;     // query head
  std::int64_t kvh;   // kv head
  std::int64_t keys;  // num_keys[r]
  bool valid;         // keys fit the block table
};

__device__ __forceinline__ RowHead row_head(const AttentionArgs& a, std::int64_t flat) {
  RowHead rh;
  rh.r = flat / a.num_heads;
  rh.h = flat % a.num_heads;
  rh.kvh = rh.h / (a.num_heads / a.kv.num_kv_heads);
  rh.keys = a.num_keys[rh.r];
  rh.valid = rh.keys <= a.kv.num_blocks * a.kv.block_size;
  return rh;
}

__device__ __forceinline__ void load_q(const AttentionArgs& a, const RowHead& rh, float* qs) {
  const float* q = a.q + rh.r * a.ldq + rh.h * a.kv.head_dim;
  for (std::int64_t i = threadIdx.x; i < a.kv.head_dim; i += blockDim.x) qs[i] = q[i];
  __syncthreads();
}

__global__ void attention_kernel(AttentionArgs a) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float s_den;
  const RowHead rh = row_head(a, blockIdx.x);
  const std::int64_t d = a.kv.head_dim;
  float* out = a.out + rh.r * a.ldo + rh.h * d;
  if (rh.keys <= 0 || !rh.valid) {  // the reference returns zeros for no keys
    const float v = rh.keys <= 0 ? 0.0f : dm::quiet_nan();
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out[c] = v;
    return;
  }
  load_q(a, rh, qs);
  const float m =
      block_max_of(rh.keys, [&](std::int64_t j) { return score(qs, a.kv, j, rh.kvh, a.scale); });
  float den = 0.0f;
  float num = 0.0f;
  attend_range(qs, a.kv, rh.kvh, a.scale, 0, rh.keys, m, &den, &num);
  if (threadIdx.x == 0) s_den = den;
  __syncthreads();
  if (threadIdx.x < d) out[threadIdx.x] = dm::div_rn(num, s_den);
}

// Split record: d numerators, then the split's max and denominator.
__global__ void attention_split_kernel(AttentionArgs a, float* ws, std::int64_t splits) {
  __shared__ float qs[kMaxHeadDim];
  const RowHead rh = row_head(a, blockIdx.x);
  const std::int64_t d = a.kv.head_dim;
  const std::int64_t sp = blockIdx.y;
  float* rec = ws + (static_cast<std::int64_t>(blockIdx.x) * splits + sp) * (d + 2);
  const std::int64_t j0 = sp * kAttentionSplitKeys;
  const std::int64_t j1 = dmin(rh.keys, j0 + kAttentionSplitKeys);
  if (j0 >= j1 || !rh.valid) return;  // the combine kernel only reads splits with keys
  load_q(a, rh, qs);
  const float m = block_max_of(
      j1 - j0, [&](std::int64_t i) { return score(qs, a.kv, j0 + i, rh.kvh, a.scale); });
  float den = 0.0f;
  float num = 0.0f;
  attend_range(qs, a.kv, rh.kvh, a.scale, j0, j1, m, &den, &num);
  if (threadIdx.x < d) rec[threadIdx.x] = num;
  if (threadIdx.x == 0) {
    rec[d] = m;
    rec[d + 1] = den;
  }
}

// Combines a row-head's splits in split order: out = sum_s num_s e_s / sum_s den_s e_s
// with e_s = exp(m_s - max_s m_s).
__global__ void attention_combine_kernel(AttentionArgs a, const float* ws, std::int64_t splits) {
  const RowHead rh = row_head(a, blockIdx.x);
  const std::int64_t d = a.kv.head_dim;
  float* out = a.out + rh.r * a.ldo + rh.h * d;
  const std::int64_t used = (rh.keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys;
  if (rh.keys <= 0 || !rh.valid || used > splits) {
    const float v = rh.keys <= 0 ? 0.0f : dm::quiet_nan();
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out[c] = v;
    return;
  }
  const float* recs = ws + static_cast<std::int64_t>(blockIdx.x) * splits * (d + 2);
  float m = recs[d];
  for (std::int64_t s = 1; s < used; ++s) m = fmaxf(m, recs[s * (d + 2) + d]);
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float den = 0.0f;
    float num = 0.0f;
    for (std::int64_t s = 0; s < used; ++s) {
      const float* rec = recs + s * (d + 2);
      const float f = dm::exp_f32(rec[d] - m);
      den = dm::fma_rn(rec[d + 1], f, den);
      num = dm::fma_rn(rec[c], f, num);
    }
    out[c] = dm::div_rn(num, den);
  }
}

AttentionArgs make_args(const float* q, std::int64_t ldq, std::int64_t rows,
                        const std::int64_t* num_keys, std::int64_t num_heads, const PagedKvView& kv,
                        float scale, float* out, std::int64_t ldo, const char* op) {
  require_ptr(q, op, "q");
  require_ptr(out, op, "out");
  require_ptr(num_keys, op, "num_keys");
  require_ptr(kv.k_pool, op, "kv.k_pool");
  require_ptr(kv.v_pool, op, "kv.v_pool");
  require_ptr(kv.block_table, op, "kv.block_table");
  require_positive(rows, op, "rows");
  require_positive(num_heads, op, "num_heads");
  require_positive(kv.num_kv_heads, op, "kv.num_kv_heads");
  require_positive(kv.head_dim, op, "kv.head_dim");
  require_positive(kv.block_size, op, "kv.block_size");
  require(kv.num_blocks >= 0, op, "kv.num_blocks must be >= 0");
  require(num_heads % kv.num_kv_heads == 0, op, "num_heads must be a multiple of num_kv_heads");
  if (kv.head_dim > kMaxHeadDim)
    fail(ErrorCode::kUnsupported, "cuda::", op, ": head_dim ", kv.head_dim, " exceeds ",
         kMaxHeadDim);
  require(ldq >= num_heads * kv.head_dim, op, "ldq must be >= num_heads * head_dim");
  require(ldo >= num_heads * kv.head_dim, op, "ldo must be >= num_heads * head_dim");
  return AttentionArgs{q, ldq, num_keys, num_heads, kv, scale, out, ldo};
}

// Enough threads for one thread per output and one per key of a 64-key tile.
unsigned attention_threads(std::int64_t head_dim) {
  return static_cast<unsigned>(dmax(kChunk, (head_dim + 31) / 32 * 32));
}

}  // namespace

void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo, Stream stream) {
  const AttentionArgs a =
      make_args(q, ldq, rows, num_keys, num_heads, kv, scale, out, ldo, "attention");
  attention_kernel<<<grid_x(rows * num_heads, "attention"), attention_threads(kv.head_dim), 0,
                     stream>>>(a);
  DETINFER_CUDA_CHECK_LAUNCH("attention_kernel");
}

std::size_t attention_split_workspace_bytes(std::int64_t rows, std::int64_t num_heads,
                                            std::int64_t head_dim, std::int64_t max_keys) {
  require_positive(rows, "attention_split_workspace_bytes", "rows");
  require_positive(num_heads, "attention_split_workspace_bytes", "num_heads");
  require_positive(head_dim, "attention_split_workspace_bytes", "head_dim");
  const std::int64_t splits = dmax(1, (max_keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys);
  return static_cast<std::size_t>(rows * num_heads * splits * (head_dim + 2)) * sizeof(float);
}

void attention_split(const float* q, std::int64_t ldq, std::int64_t rows,
                     const std::int64_t* num_keys, std::int64_t max_keys, std::int64_t num_heads,
                     const PagedKvView& kv, float scale, float* out, std::int64_t ldo,
                     void* workspace, std::size_t workspace_bytes, Stream stream) {
  const AttentionArgs a =
      make_args(q, ldq, rows, num_keys, num_heads, kv, scale, out, ldo, "attention_split");
  require_ptr(workspace, "attention_split", "workspace");
  require(max_keys >= 0, "attention_split", "max_keys must be >= 0");
  require(
      workspace_bytes >= attention_split_workspace_bytes(rows, num_heads, kv.head_dim, max_keys),
      "attention_split", "workspace smaller than attention_split_workspace_bytes()");
  const std::int64_t splits = dmax(1, (max_keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys);
  float* ws = static_cast<float*>(workspace);
  const unsigned threads = attention_threads(kv.head_dim);
  const dim3 grid(grid_x(rows * num_heads, "attention_split"), grid_yz(splits, "attention_split"));
  attention_split_kernel<<<grid, threads, 0, stream>>>(a, ws, splits);
  DETINFER_CUDA_CHECK_LAUNCH("attention_split_kernel");
  attention_combine_kernel<<<grid.x, threads, 0, stream>>>(a, ws, splits);
  DETINFER_CUDA_CHECK_LAUNCH("attention_combine_kernel");
}

}  // namespace detinfer::kernels::cuda
