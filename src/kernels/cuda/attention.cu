// Paged-KV attention on the GPU: the canonical kernel (spec v1, bitwise = the reference)
// and the device-invariant split kernel (fixed split SIZE over keys); both take
// kernels::AttentionMask's sliding window and soft-cap.
//
// Both process keys in tiles of 64 that coincide with the spec's reduction chunks, so a
// tile's exp values, its partial of the denominator (one thread, in key order) and its
// partials of the numerators (thread c for output c, in key order) are exactly the
// reference's chunk partials; the running sums then add them in chunk order.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace detinfer::kernels::cuda {

namespace {

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
  require(kv.kv_dtype == core::DType::kF32 || kv.kv_dtype == core::DType::kBF16 ||
              kv.kv_dtype == core::DType::kF16,
          op, "kv.kv_dtype must be f32, bf16 or f16");
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
  attention_masked(q, ldq, rows, num_keys, num_heads, kv, scale, 0, 0.0f, out, ldo, stream);
}

void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                      const std::int64_t* num_keys, std::int64_t num_heads, const PagedKvView& kv,
                      float scale, std::int64_t window, float softcap, float* out, std::int64_t ldo,
                      Stream stream) {
  AttentionArgs a = make_args(q, ldq, rows, num_keys, num_heads, kv, scale, out, ldo, "attention");
  require(window >= 0, "attention", "window must be >= 0");
  require(softcap >= 0.0f, "attention", "softcap must be >= 0");
  a.window = window;
  a.softcap = softcap;
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
  attention_split_masked(q, ldq, rows, num_keys, max_keys, num_heads, kv, scale, 0, 0.0f, out, ldo,
                         workspace, workspace_bytes, stream);
}

void attention_split_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                            const std::int64_t* num_keys, std::int64_t max_keys,
                            std::int64_t num_heads, const PagedKvView& kv, float scale,
                            std::int64_t window, float softcap, float* out, std::int64_t ldo,
                            void* workspace, std::size_t workspace_bytes, Stream stream) {
  AttentionArgs a =
      make_args(q, ldq, rows, num_keys, num_heads, kv, scale, out, ldo, "attention_split");
  require_ptr(workspace, "attention_split", "workspace");
  require(max_keys >= 0, "attention_split", "max_keys must be >= 0");
  require(window >= 0, "attention_split", "window must be >= 0");
  require(softcap >= 0.0f, "attention_split", "softcap must be >= 0");
  a.window = window;
  a.softcap = softcap;
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
