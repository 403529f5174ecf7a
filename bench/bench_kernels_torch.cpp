#include "bench_kernels_torch.h"

#include <torch/torch.h>

#include <cstring>

// OpenBLAS keeps its own thread count; at::set_num_threads does not always reach it.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace detinfer::bench {

struct TorchLinear::Impl {
  torch::Tensor x, w, y;
};

TorchLinear::TorchLinear(const float* x, const float* w, std::int64_t m, std::int64_t n,
                         std::int64_t k)
    : impl_(std::make_unique<Impl>()) {
  impl_->x = torch::from_blob(const_cast<float*>(x), {m, k}, torch::kFloat32).clone();
  impl_->w = torch::from_blob(const_cast<float*>(w), {n, k}, torch::kFloat32).clone();
}

TorchLinear::~TorchLinear() = default;

void TorchLinear::set_threads(int threads) {
  at::set_num_threads(threads);
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
}

void TorchLinear::run() { impl_->y = torch::mm(impl_->x, impl_->w.t()); }

void TorchLinear::result(float* y) const {
  const torch::Tensor c = impl_->y.contiguous();
  std::memcpy(y, c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
}

}  // namespace detinfer::bench
