// The table of CUDA operations the CUDA backend uses: device memory and the
// kernels::cuda:: launchers, one virtual per launcher with the launcher's signature (minus
// the stream, which the table owns). The real table (cuda_ops_real.cpp) forwards to
// kernels::cuda::; the emulation test (tests/cuda/cuda_model_emulation_test.cpp) runs the
// same kernels' device code on the CPU behind the same table, so CudaBackend's whole
// logic — buffers, staging, strides, which kernel runs when — is exercised without a GPU.
// Includes no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/kernels.h"
#include "kernels/reference/quant_blocks.h"
#include "model/backend.h"

namespace detinfer::model {

class CudaOps {
 public:
  virtual ~CudaOps() = default;

  // The device as a run fingerprint records it (model, compute capability, driver).
  virtual DeviceInfo device_info() const = 0;

  // --- memory: allocations are zero-filled; upload/download are synchronous (download
  // waits for the queued kernels); copy is a device-to-device copy queued on the stream.
  virtual void* malloc_zeroed(std::size_t bytes) = 0;
  virtual void free(void* p) noexcept = 0;
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // Waits for every queued kernel and copy.
  virtual void synchronize() = 0;

  // --- canonical kernels (bitwise = kernels::ref) ---
  virtual void embedding(const std::int32_t* ids, std::int64_t rows, const void* table,
                         core::DType dtype, std::int64_t vocab, std::int64_t dim, float* out,
                         std::int64_t ldo) = 0;
  virtual void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                        std::int64_t ldy, std::int64_t rows, std::int64_t n) = 0;
  virtual void linear(const float* x, std::int64_t ldx, std::int64_t m, const void* w,
                      core::DType dtype, std::int64_t n, std::int64_t k, const float* bias,
                      float* y, std::int64_t ldy) = 0;
  virtual void rope(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads,
                    std::int64_t ldh, std::int64_t d, const float* cos, const float* sin,
                    std::int64_t ld_table, const std::int32_t* positions) = 0;
  virtual void kv_write(const float* k, const float* v, std::int64_t ld, std::int64_t rows,
                        std::int64_t start_pos, const std::int32_t* block_table,
                        std::int64_t block_size, std::int64_t kv_stride, void* k_pool, void* v_pool,
                        core::DType kv_dtype) = 0;
  virtual void attention(const float* q, std::int64_t ldq, std::int64_t rows,
                         const std::int64_t* num_keys, std::int64_t num_heads,
                         const kernels::PagedKvView& kv, float scale, float* out,
                         std::int64_t ldo) = 0;
  // attention() with a sliding window and soft-capped scores (kernels::AttentionMask).
  virtual void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                                const std::int64_t* num_keys, std::int64_t num_heads,
                                const kernels::PagedKvView& kv, float scale, std::int64_t window,
                                float softcap, float* out, std::int64_t ldo) = 0;
  virtual void silu_mul(const float* g, const float* u, float* out, std::int64_t n) = 0;
  // Gemma 2 / 3 (issue 29).
  virtual void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n) = 0;
  virtual void scale(float* x, float s, std::int64_t n) = 0;
  virtual void softcap(float* x, float cap, std::int64_t n) = 0;
  virtual void add(const float* a, const float* b, float* out, std::int64_t n) = 0;

  // --- canonical quantized linear (bitwise = kernels::ref::quant_linear): weights decoded
  // on the host to wq [n][k] int8 plus one ref::BlockScales per (row, 32-block); see
  // kernels::cuda::quantize_acts / quant_linear / quant_embedding.
  virtual void quantize_acts(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                             std::int8_t* xq, float* xd, std::int32_t* xs) = 0;
  virtual void quant_linear(const std::int8_t* xq, const float* xd, const std::int32_t* xs,
                            std::int64_t m, const std::int8_t* wq,
                            const kernels::ref::BlockScales* ws, bool has_min, std::int64_t n,
                            std::int64_t k, const float* bias, float* y, std::int64_t ldy) = 0;
  virtual void quant_embedding(const std::int32_t* ids, std::int64_t rows, const std::int8_t* wq,
                               const kernels::ref::BlockScales* ws, bool has_min,
                               std::int64_t vocab, std::int64_t dim, float* out,
                               std::int64_t ldo) = 0;

  // --- device-invariant kernels (tensor cores, fixed reduction shapes) ---
  virtual void f32_to_bf16(const float* x, std::uint16_t* y, std::int64_t n) = 0;
  virtual void linear_bf16_tc(const std::uint16_t* x, std::int64_t ldx, std::int64_t m,
                              const std::uint16_t* w, std::int64_t n, std::int64_t k,
                              const float* bias, float* y, std::int64_t ldy) = 0;
  virtual void rms_norm_fast(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                             std::int64_t ldy, std::int64_t rows, std::int64_t n) = 0;
  virtual std::size_t attention_split_workspace_bytes(std::int64_t rows, std::int64_t num_heads,
                                                      std::int64_t head_dim,
                                                      std::int64_t max_keys) = 0;
  // kernels::cuda::attention_split_masked (window 0 and softcap 0: attention_split).
  virtual void attention_split(const float* q, std::int64_t ldq, std::int64_t rows,
                               const std::int64_t* num_keys, std::int64_t max_keys,
                               std::int64_t num_heads, const kernels::PagedKvView& kv, float scale,
                               std::int64_t window, float softcap, float* out, std::int64_t ldo,
                               void* workspace, std::size_t workspace_bytes) = 0;
};

}  // namespace detinfer::model
