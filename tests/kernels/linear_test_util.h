// Shared fixtures of the packed-linear tests (fused_linear_test, batched_linear_test):
// one thread pool per count (the ISA helpers are in isa_test_util.h), and a random linear
// with its exact f32 widening and reference output.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::testing {

// nullptr for one thread, else a pool of `threads` (1..8) kept for the whole test run.
inline core::ThreadPool* pool_for(int threads) {
  static std::unique_ptr<core::ThreadPool> pools[9];
  if (threads <= 1) return nullptr;
  if (!pools[threads]) pools[threads] = std::make_unique<core::ThreadPool>(threads);
  return pools[threads].get();
}

// Packed random weights (n x k, optional bias) plus their exact f32 widening (what the
// reference reads).
struct TestLinear {
  std::int64_t n, k;
  std::vector<float> f32, bias;
  PackedLinear packed;
  TestLinear(core::DType dtype, std::int64_t n_, std::int64_t k_, std::uint64_t stream,
             bool with_bias)
      : n(n_), k(k_) {
    std::vector<std::uint16_t> half;
    if (dtype == core::DType::kF32) {
      f32 = random_floats(n * k, stream);
    } else {
      half = dtype == core::DType::kBF16 ? random_bf16(n * k, stream) : random_f16(n * k, stream);
      for (std::uint16_t h : half)
        f32.push_back(dtype == core::DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h));
    }
    if (with_bias) bias = random_floats(n, stream + 1);
    const void* data = half.empty() ? static_cast<const void*>(f32.data()) : half.data();
    packed = PackedLinear::pack(data, dtype, n, k, bias.empty() ? nullptr : bias.data());
  }
  // ref::linear of m rows of x (row stride k).
  std::vector<float> reference(const std::vector<float>& x, std::int64_t m) const {
    std::vector<float> y(m * n);
    ref::linear(x.data(), k, m, f32.data(), n, k, bias.empty() ? nullptr : bias.data(), y.data(),
                n);
    return y;
  }
};

}  // namespace detinfer::kernels::testing
