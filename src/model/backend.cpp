#include "model/backend.h"

#include <utility>

#include "core/check.h"

namespace detinfer::model {

BackendBuffer::~BackendBuffer() {
  if (owner_ != nullptr && ptr_ != nullptr) owner_->free(ptr_);
}

BackendBuffer::BackendBuffer(BackendBuffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

BackendBuffer& BackendBuffer::operator=(BackendBuffer&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr && ptr_ != nullptr) owner_->free(ptr_);
    owner_ = std::exchange(other.owner_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

BackendBuffer Backend::alloc(std::size_t bytes, Touch touch) {
  // Never a null pointer, even for 0 bytes: kernels check their pointers.
  return BackendBuffer(this, allocate_zeroed(bytes == 0 ? 1 : bytes, touch), bytes);
}

BackendBuffer Backend::upload_new(const void* host, std::size_t bytes) {
  BackendBuffer b = alloc(bytes);
  if (bytes > 0) upload(b.data(), host, bytes);
  return b;
}

std::unique_ptr<BackendLinear> Backend::make_quantized_linear(const void* /*blocks*/,
                                                              kernels::QuantFormat format,
                                                              std::int64_t /*n*/,
                                                              std::int64_t /*k*/,
                                                              const float* /*bias*/) {
  throw Error(ErrorCode::kUnsupported,
              str_cat("weights ", kernels::to_string(format), " needs the CPU backend; backend ",
                      name(), " has no quantized kernels"),
              "weights");
}

void Backend::embedding_from_linear(const BackendLinear& /*w*/, float* /*x*/) {
  fail(ErrorCode::kInternal, "backend ", name(), " cannot read embedding rows from a linear");
}

void Backend::project_qkv(const BackendLinear& wq, const BackendLinear& wk, const BackendLinear& wv,
                          const float* x, std::int64_t m, float* q, float* k, float* v) {
  linear(wq, x, wq.k(), m, q, wq.n());
  linear(wk, x, wk.k(), m, k, wk.n());
  linear(wv, x, wv.k(), m, v, wv.n());
}

void Backend::mlp_gate_up(const BackendLinear& wgate, const BackendLinear& wup, const float* x,
                          std::int64_t m, float* g, float* u, float* a) {
  linear(wgate, x, wgate.k(), m, g, wgate.n());
  linear(wup, x, wup.k(), m, u, wup.n());
  silu_mul(g, u, a, m * wgate.n());
}

// --- Gemma 2 / Gemma 3: refused unless a backend implements them ---

namespace {
[[noreturn]] void no_gemma(const Backend& b, const char* op) {
  throw Error(ErrorCode::kUnsupported,
              str_cat("backend ", b.name(), " does not implement ", op,
                      " (the CPU and CUDA backends run Gemma 2 / Gemma 3)"),
              "backend");
}
}  // namespace

void Backend::scale(float* /*x*/, float /*s*/, std::int64_t /*n*/) { no_gemma(*this, "scale"); }

void Backend::mlp_gate_up_gelu(const BackendLinear& /*wgate*/, const BackendLinear& /*wup*/,
                               const float* /*x*/, std::int64_t /*m*/, float* /*g*/, float* /*u*/,
                               float* /*a*/) {
  no_gemma(*this, "the GeGLU MLP");
}

void Backend::softcap(float* /*x*/, float /*cap*/, std::int64_t /*n*/) {
  no_gemma(*this, "soft-capping");
}

void Backend::set_rope(const RopeTable& /*rope*/) { no_gemma(*this, "per-layer RoPE tables"); }

}  // namespace detinfer::model
