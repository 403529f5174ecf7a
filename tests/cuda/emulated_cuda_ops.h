// A CudaOps table (model/cuda_ops.h) that runs the CUDA kernels' own device code on the CPU
// through tests/cuda/cuda_emulator.h, with the launch shapes of the launchers
// (canonical.cu, attention.cu, fast.cu) and host memory as "device" memory. The model's
// CudaBackend over this table is the GPU forward pass minus the hardware.
//
// Include after the model headers; it includes the emulator and the kernels' .cuh files.
#pragma once

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda/cuda_emulator.h"  // first of the CUDA headers: defines the CUDA keywords
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/canonical_kernels.cuh"
#include "kernels/cuda/fast_kernels.cuh"
#include "kernels/cuda/gemma_kernels.cuh"
#include "kernels/cuda/quant_kernels.cuh"
#include "model/cuda_ops.h"

namespace detinfer::testing {

namespace kc = kernels::cuda;

class EmulatedCudaOps final : public model::CudaOps {
 public:
  model::DeviceInfo device_info() const override {
    return {"cuda", "CUDA emulator (CPU threads)", "emulated", "none"};
  }

  void* malloc_zeroed(std::size_t bytes) override {
    // 256-byte aligned like cudaMalloc (the tensor-core path checks 16/32-byte alignment).
    const std::size_t size = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, size == 0 ? 256 : size);
    std::memset(p, 0, size == 0 ? 256 : size);
    return p;
  }
  void free(void* p) noexcept override { std::free(p); }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    std::memcpy(host, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}

  void embedding(const std::int32_t* ids, std::int64_t rows, const void* table, core::DType dtype,
                 std::int64_t vocab, std::int64_t dim, float* out, std::int64_t ldo) override {
    std::int32_t* flag = nullptr;
    const dim3 grid(static_cast<unsigned>(rows));
    if (dtype == core::DType::kF32) {
      emu::launch(grid, dim3(kThreads), 0, kc::embedding_kernel<core::DType::kF32>, ids, table,
                  vocab, dim, out, ldo, flag);
    } else if (dtype == core::DType::kBF16) {
      emu::launch(grid, dim3(kThreads), 0, kc::embedding_kernel<core::DType::kBF16>, ids, table,
                  vocab, dim, out, ldo, flag);
    } else {
      emu::launch(grid, dim3(kThreads), 0, kc::embedding_kernel<core::DType::kF16>, ids, table,
                  vocab, dim, out, ldo, flag);
    }
  }
  void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                std::int64_t ldy, std::int64_t rows, std::int64_t n) override {
    emu::launch(dim3(static_cast<unsigned>(rows)), dim3(kThreads), chunk_bytes(n),
                kc::rms_norm_kernel, x, ldx, w, eps, y, ldy, n);
  }
  void linear(const float* x, std::int64_t ldx, std::int64_t m, const void* w, core::DType dtype,
              std::int64_t n, std::int64_t k, const float* bias, float* y,
              std::int64_t ldy) override {
    const dim3 grid(static_cast<unsigned>((n + kc::kLinWarps - 1) / kc::kLinWarps));
    const dim3 block(kc::kLinWarps * 32);
    const bool aligned = reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
    if (dtype == core::DType::kF32) {
      emu::launch(grid, block, 0, kc::linear_kernel<core::DType::kF32>, x, ldx, m, w, n, k, bias, y,
                  ldy, k % kc::kVecElems<core::DType::kF32> == 0 && aligned);
    } else if (dtype == core::DType::kBF16) {
      emu::launch(grid, block, 0, kc::linear_kernel<core::DType::kBF16>, x, ldx, m, w, n, k, bias,
                  y, ldy, k % kc::kVecElems<core::DType::kBF16> == 0 && aligned);
    } else {
      emu::launch(grid, block, 0, kc::linear_kernel<core::DType::kF16>, x, ldx, m, w, n, k, bias, y,
                  ldy, k % kc::kVecElems<core::DType::kF16> == 0 && aligned);
    }
  }
  void rope(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads, std::int64_t ldh,
            std::int64_t d, const float* cos, const float* sin, std::int64_t ld_table,
            const std::int32_t* positions) override {
    emu::launch(dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, kc::rope_kernel, x, ldx,
                heads, ldh, d, cos, sin, ld_table, positions);
  }
  void kv_write(const float* k, const float* v, std::int64_t ld, std::int64_t rows,
                std::int64_t start_pos, const std::int32_t* block_table, std::int64_t block_size,
                std::int64_t kv_stride, void* k_pool, void* v_pool, core::DType kv_dtype) override {
    emu::launch(dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, kc::kv_write_kernel, k, v, ld,
                start_pos, block_table, block_size, kv_stride, k_pool, v_pool, kv_dtype);
  }
  void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
                 std::int64_t num_heads, const kernels::PagedKvView& kv, float scale, float* out,
                 std::int64_t ldo) override {
    const kc::AttentionArgs a{q, ldq, num_keys, num_heads, kv, scale, out, ldo};
    emu::launch(dim3(static_cast<unsigned>(rows * num_heads)), dim3(attention_threads(kv.head_dim)),
                0, kc::attention_kernel, a);
  }
  void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                        const std::int64_t* num_keys, std::int64_t num_heads,
                        const kernels::PagedKvView& kv, float scale, std::int64_t window,
                        float softcap, float* out, std::int64_t ldo) override {
    const kc::AttentionArgs a{q, ldq, num_keys, num_heads, kv, scale, out, ldo, window, softcap};
    emu::launch(dim3(static_cast<unsigned>(rows * num_heads)), dim3(attention_threads(kv.head_dim)),
                0, kc::attention_kernel, a);
  }
  void silu_mul(const float* g, const float* u, float* out, std::int64_t n) override {
    emu::launch(dim3(elementwise_blocks(n)), dim3(kThreads), 0, kc::silu_mul_kernel, g, u, out, n);
  }
  void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n) override {
    emu::launch(dim3(elementwise_blocks(n)), dim3(kThreads), 0, kc::gelu_tanh_mul_kernel, g, u, out,
                n);
  }
  void scale(float* x, float s, std::int64_t n) override {
    emu::launch(dim3(elementwise_blocks(n)), dim3(kThreads), 0, kc::scale_kernel, x, s, n);
  }
  void softcap(float* x, float cap, std::int64_t n) override {
    emu::launch(dim3(elementwise_blocks(n)), dim3(kThreads), 0, kc::softcap_kernel, x, cap, n);
  }
  void add(const float* a, const float* b, float* out, std::int64_t n) override {
    emu::launch(dim3(elementwise_blocks(n)), dim3(kThreads), 0, kc::add_kernel, a, b, out, n);
  }
  // The launch shapes of quant.cu (128 threads, a grid-stride loop over the work items).
  void quantize_acts(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                     std::int8_t* xq, float* xd, std::int32_t* xs) override {
    emu::launch(dim3(quant_blocks(m * (k / 32))), dim3(kQuantThreads), 0, kc::quantize_acts_kernel,
                x, ldx, m, k, xq, xd, xs);
  }
  void quant_linear(const std::int8_t* xq, const float* xd, const std::int32_t* xs, std::int64_t m,
                    const std::int8_t* wq, const kernels::ref::BlockScales* ws, bool has_min,
                    std::int64_t n, std::int64_t k, const float* bias, float* y,
                    std::int64_t ldy) override {
    emu::launch(dim3(quant_blocks(m * n)), dim3(kQuantThreads), 0, kc::quant_linear_kernel, xq, xd,
                xs, m, wq, ws, has_min, n, k, bias, y, ldy);
  }
  void quant_embedding(const std::int32_t* ids, std::int64_t rows, const std::int8_t* wq,
                       const kernels::ref::BlockScales* ws, bool has_min, std::int64_t vocab,
                       std::int64_t dim, float* out, std::int64_t ldo) override {
    emu::launch(dim3(quant_blocks(rows * dim)), dim3(kQuantThreads), 0, kc::quant_embedding_kernel,
                ids, rows, wq, ws, has_min, vocab, dim, out, ldo);
  }
  void f32_to_bf16(const float* x, std::uint16_t* y, std::int64_t n) override {
    emu::launch(dim3(elementwise_blocks(n)), dim3(kThreads), 0, kc::f32_to_bf16_kernel, x, y, n);
  }
  void linear_bf16_tc(const std::uint16_t* x, std::int64_t ldx, std::int64_t m,
                      const std::uint16_t* w, std::int64_t n, std::int64_t k, const float* bias,
                      float* y, std::int64_t ldy) override {
    const dim3 grid(static_cast<unsigned>((n + kc::kGemmTileN - 1) / kc::kGemmTileN),
                    static_cast<unsigned>((m + kc::kGemmTileM - 1) / kc::kGemmTileM));
    emu::launch(grid, dim3(kc::kGemmThreads), 0, kc::gemm_bf16_kernel, x, ldx, m, w, n, k, bias, y,
                ldy);
  }
  void rms_norm_fast(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                     std::int64_t ldy, std::int64_t rows, std::int64_t n) override {
    emu::launch(dim3(static_cast<unsigned>(rows)), dim3(kc::kFastNormThreads), 0,
                kc::rms_norm_fast_kernel, x, ldx, w, eps, y, ldy, n);
  }
  std::size_t attention_split_workspace_bytes(std::int64_t rows, std::int64_t num_heads,
                                              std::int64_t head_dim,
                                              std::int64_t max_keys) override {
    return static_cast<std::size_t>(rows * num_heads * splits(max_keys) * (head_dim + 2)) *
           sizeof(float);
  }
  void attention_split(const float* q, std::int64_t ldq, std::int64_t rows,
                       const std::int64_t* num_keys, std::int64_t max_keys, std::int64_t num_heads,
                       const kernels::PagedKvView& kv, float scale, std::int64_t window,
                       float softcap, float* out, std::int64_t ldo, void* workspace,
                       std::size_t /*workspace_bytes*/) override {
    const kc::AttentionArgs a{q, ldq, num_keys, num_heads, kv, scale, out, ldo, window, softcap};
    const std::int64_t s = splits(max_keys);
    const auto row_heads = static_cast<unsigned>(rows * num_heads);
    auto* ws = static_cast<float*>(workspace);
    const dim3 threads(attention_threads(kv.head_dim));
    emu::launch(dim3(row_heads, static_cast<unsigned>(s)), threads, 0, kc::attention_split_kernel,
                a, ws, s);
    emu::launch(dim3(row_heads), threads, 0, kc::attention_combine_kernel, a,
                static_cast<const float*>(ws), s);
  }

 private:
  static constexpr unsigned kThreads = 256;  // the launchers' block size for row/elementwise ops

  static constexpr unsigned kQuantThreads = 128;  // quant.cu's block size
  static unsigned quant_blocks(std::int64_t work) {
    const std::int64_t b = (work + kQuantThreads - 1) / kQuantThreads;
    return static_cast<unsigned>(b < 1 ? 1 : (b < 65535 ? b : 65535));
  }
  static std::size_t chunk_bytes(std::int64_t n) {
    return static_cast<std::size_t>((n + 63) / 64) * sizeof(float);
  }
  static unsigned elementwise_blocks(std::int64_t n) {
    const std::int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 65535 ? b : 65535);
  }
  static unsigned attention_threads(std::int64_t head_dim) {
    const std::int64_t t = (head_dim + 31) / 32 * 32;
    return static_cast<unsigned>(t > 64 ? t : 64);
  }
  static std::int64_t splits(std::int64_t max_keys) {
    const std::int64_t s = (max_keys + kc::kAttentionSplitKeys - 1) / kc::kAttentionSplitKeys;
    return s > 1 ? s : 1;
  }
};

}  // namespace detinfer::testing
