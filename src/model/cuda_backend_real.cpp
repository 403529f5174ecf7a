// The real CudaOps table: kernels::cuda:: on one device, on the default stream. Every call
// first makes the device current on the calling thread (the engine thread, the loading
// thread and the prefix cache's callers all use it).
#include "core/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "model/cuda_backend.h"

namespace detinfer::model {
namespace {

namespace kc = kernels::cuda;

class RealCudaOps final : public CudaOps {
 public:
  explicit RealCudaOps(int device) : device_(device) {
    kc::set_device(device_);
    const kc::DeviceProperties p = kc::device_properties(device_);
    info_.device = "cuda";
    info_.name = p.name;
    info_.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
    info_.driver = p.driver;
  }

  DeviceInfo device_info() const override { return info_; }

  void* malloc_zeroed(std::size_t bytes) override {
    bind();
    return kc::malloc_device_zeroed(bytes);
  }
  void free(void* p) noexcept override {
    try {
      bind();
    } catch (...) {  // a free cannot fail; the device is gone anyway
    }
    kc::free_device(p);
  }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    bind();
    kc::copy_from_host(dst, host, bytes);
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    bind();
    kc::copy_to_host(host, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    bind();
    kc::copy_device(dst, src, bytes, nullptr);
  }
  void synchronize() override {
    bind();
    kc::synchronize(nullptr);
  }

  void embedding(const std::int32_t* ids, std::int64_t rows, const void* table, core::DType dtype,
                 std::int64_t vocab, std::int64_t dim, float* out, std::int64_t ldo) override {
    bind();
    kc::embedding(ids, rows, table, dtype, vocab, dim, out, ldo, nullptr, nullptr);
  }
  void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                std::int64_t ldy, std::int64_t rows, std::int64_t n) override {
    bind();
    kc::rms_norm(x, ldx, w, eps, y, ldy, rows, n, nullptr);
  }
  void linear(const float* x, std::int64_t ldx, std::int64_t m, const void* w, core::DType dtype,
              std::int64_t n, std::int64_t k, const float* bias, float* y,
              std::int64_t ldy) override {
    bind();
    kc::linear(x, ldx, m, w, dtype, n, k, bias, y, ldy, nullptr);
  }
  void quantize_acts(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                     std::int8_t* xq, float* xd, std::int32_t* xs) override {
    bind();
    kc::quantize_acts(x, ldx, m, k, xq, xd, xs, nullptr);
  }
  void quant_linear(const std::int8_t* xq, const float* xd, const std::int32_t* xs, std::int64_t m,
                    const std::int8_t* wq, const kernels::ref::BlockScales* ws, bool has_min,
                    std::int64_t n, std::int64_t k, const float* bias, float* y,
                    std::int64_t ldy) override {
    bind();
    kc::quant_linear(xq, xd, xs, m, wq, ws, has_min, n, k, bias, y, ldy, nullptr);
  }
  void quant_embedding(const std::int32_t* ids, std::int64_t rows, const std::int8_t* wq,
                       const kernels::ref::BlockScales* ws, bool has_min, std::int64_t vocab,
                       std::int64_t dim, float* out, std::int64_t ldo) override {
    bind();
    kc::quant_embedding(ids, rows, wq, ws, has_min, vocab, dim, out, ldo, nullptr);
  }
  void rope(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads, std::int64_t ldh,
            std::int64_t d, const float* cos, const float* sin, std::int64_t ld_table,
            const std::int32_t* positions) override {
    bind();
    kc::rope(x, rows, ldx, heads, ldh, d, cos, sin, ld_table, positions, nullptr);
  }
  void kv_write(const float* k, const float* v, std::int64_t ld, std::int64_t rows,
                std::int64_t start_pos, const std::int32_t* block_table, std::int64_t block_size,
                std::int64_t kv_stride, void* k_pool, void* v_pool, core::DType kv_dtype) override {
    bind();
    kc::kv_write(k, v, ld, rows, start_pos, block_table, block_size, kv_stride, k_pool, v_pool,
                 kv_dtype, nullptr);
  }
  void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
                 std::int64_t num_heads, const kernels::PagedKvView& kv, float scale, float* out,
                 std::int64_t ldo) override {
    bind();
    kc::attention(q, ldq, rows, num_keys, num_heads, kv, scale, out, ldo, nullptr);
  }
  void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                        const std::int64_t* num_keys, std::int64_t num_heads,
                        const kernels::PagedKvView& kv, float scale, std::int64_t window,
                        float softcap, float* out, std::int64_t ldo) override {
    kc::attention_masked(q, ldq, rows, num_keys, num_heads, kv, scale, window, softcap, out, ldo,
                         nullptr);
  }
  void silu_mul(const float* g, const float* u, float* out, std::int64_t n) override {
    bind();
    kc::silu_mul(g, u, out, n, nullptr);
  }
  void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n) override {
    bind();
    kc::gelu_tanh_mul(g, u, out, n, nullptr);
  }
  void scale(float* x, float s, std::int64_t n) override {
    bind();
    kc::scale(x, s, n, nullptr);
  }
  void softcap(float* x, float cap, std::int64_t n) override {
    bind();
    kc::softcap(x, cap, n, nullptr);
  }
  void add(const float* a, const float* b, float* out, std::int64_t n) override {
    bind();
    kc::add(a, b, out, n, nullptr);
  }
  void f32_to_bf16(const float* x, std::uint16_t* y, std::int64_t n) override {
    bind();
    kc::f32_to_bf16(x, y, n, nullptr);
  }
  void linear_bf16_tc(const std::uint16_t* x, std::int64_t ldx, std::int64_t m,
                      const std::uint16_t* w, std::int64_t n, std::int64_t k, const float* bias,
                      float* y, std::int64_t ldy) override {
    bind();
    kc::linear_bf16_tc(x, ldx, m, w, n, k, bias, y, ldy, nullptr);
  }
  void rms_norm_fast(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                     std::int64_t ldy, std::int64_t rows, std::int64_t n) override {
    bind();
    kc::rms_norm_fast(x, ldx, w, eps, y, ldy, rows, n, nullptr);
  }
  std::size_t attention_split_workspace_bytes(std::int64_t rows, std::int64_t num_heads,
                                              std::int64_t head_dim,
                                              std::int64_t max_keys) override {
    return kc::attention_split_workspace_bytes(rows, num_heads, head_dim, max_keys);
  }
  void attention_split(const float* q, std::int64_t ldq, std::int64_t rows,
                       const std::int64_t* num_keys, std::int64_t max_keys, std::int64_t num_heads,
                       const kernels::PagedKvView& kv, float scale, std::int64_t window,
                       float softcap, float* out, std::int64_t ldo, void* workspace,
                       std::size_t workspace_bytes) override {
    bind();
    kc::attention_split_masked(q, ldq, rows, num_keys, max_keys, num_heads, kv, scale, window,
                               softcap, out, ldo, workspace, workspace_bytes, nullptr);
  }

 private:
  void bind() { kc::set_device(device_); }

  int device_;
  DeviceInfo info_;
};

}  // namespace

std::shared_ptr<Backend> make_cuda_backend(int device, NumericsMode mode) {
  const int count = kc::device_count();
  if (count == 0) {
    throw Error(ErrorCode::kUnavailable,
                str_cat("device cuda:", device, " is unavailable: ", kc::no_device_reason()),
                "device");
  }
  if (device >= count) {
    throw Error(ErrorCode::kUnavailable,
                str_cat("device cuda:", device, " is unavailable: this machine has ", count,
                        " CUDA device(s) (cuda:0..cuda:", count - 1, ")"),
                "device");
  }
  return make_cuda_backend_over(std::make_shared<RealCudaOps>(device), mode,
                                "cuda:" + std::to_string(device));
}

}  // namespace detinfer::model
