// torch::mm (OpenBLAS) baseline for bench_kernels, in its own translation unit so that
// only this file includes libtorch.
#pragma once

#include <cstdint>
#include <memory>

namespace detinfer::bench {

// y = x @ W^T with x [m][k], W [n][k] (nn.Linear layout), all f32, via torch::mm.
class TorchLinear {
 public:
  TorchLinear(const float* x, const float* w, std::int64_t m, std::int64_t n, std::int64_t k);
  ~TorchLinear();
  void set_threads(int threads);
  void run();
  // Copies the last result (m*n floats) to y.
  void result(float* y) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detinfer::bench
