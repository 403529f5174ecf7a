// Negative control: the batch-invariance check of equivalence_test.cpp applied to
// torch::mm (OpenBLAS). BLAS picks its blocking and reduction order from the shape, so
// mm(x[:m], W) usually differs from mm(x, W)[:m]; the difference is printed, not
// asserted, since it depends on the BLAS build. The same check on PackedLinear must
// find nothing, which shows the check itself is able to see a difference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace detinfer::kernels {
namespace {

// Rows [0, m) of an M-row product, computed on m rows only vs taken from the full one.
struct Invariance {
  int sizes_that_differ = 0;
  double max_abs_diff = 0;
  std::string which;  // the batch sizes that differ
};

TEST(NegativeControl, TorchMmIsNotBatchInvariantButPackedLinearIs) {
  // Qwen2-0.5B's hidden size; OpenBLAS takes different paths (gemv, small-matrix and
  // blocked gemm kernels) depending on m, so some batch sizes change the bits.
  const std::int64_t mmax = 256, k = 896, n = 896;
  const std::vector<float> xv = testing::random_floats(mmax * k, 71);
  const std::vector<float> wv = testing::random_floats(n * k, 72);
  const torch::Tensor x = torch::from_blob(const_cast<float*>(xv.data()), {mmax, k}).clone();
  const torch::Tensor w = torch::from_blob(const_cast<float*>(wv.data()), {n, k}).clone();
  const PackedLinear packed = PackedLinear::pack(wv.data(), core::DType::kF32, n, k);
  std::vector<float> ours_full(mmax * n);
  packed.run(xv.data(), k, mmax, ours_full.data(), n, nullptr);
  std::vector<std::int64_t> sizes;
  for (std::int64_t m = 1; m <= 64; ++m) sizes.push_back(m);
  for (std::int64_t m : {100, 128, 200, 255}) sizes.push_back(m);
  const int threads = 1;  // the result was the same with 2 threads on this machine
  at::set_num_threads(threads);
  // nn.Linear's layout (x @ W^T, W [N][K]) and the plain x @ W layout.
  for (bool transposed : {true, false}) {
    const torch::Tensor wm = transposed ? w.t() : w;
    const torch::Tensor full = torch::mm(x, wm);
    Invariance inv;
    for (std::int64_t m : sizes) {
      const torch::Tensor part = torch::mm(x.narrow(0, 0, m), wm);
      const double d = (part - full.narrow(0, 0, m)).abs().max().item<double>();
      inv.max_abs_diff = std::max(inv.max_abs_diff, d);
      if (d > 0) {
        ++inv.sizes_that_differ;
        inv.which += " " + std::to_string(m);
      }
    }
    std::printf(
        "negative control: torch::mm(x[:m], %s) vs torch::mm(x, %s)[:m], K=N=%lld, M=%lld, "
        "%zu batch sizes m, %d threads: %d differ (m =%s), max |diff| = %.3g\n",
        transposed ? "W^T" : "W", transposed ? "W^T" : "W", static_cast<long long>(k),
        static_cast<long long>(mmax), sizes.size(), threads, inv.sizes_that_differ,
        inv.which.c_str(), inv.max_abs_diff);
  }
  // The same check on PackedLinear: asserted.
  for (std::int64_t m : sizes) {
    std::vector<float> ours(m * n);
    packed.run(xv.data(), k, m, ours.data(), n, nullptr);
    ASSERT_TRUE(testing::same_bits(ours.data(), ours_full.data(), m * n)) << "m=" << m;
  }
  std::printf("PackedLinear: 0 of %zu batch sizes differ\n", sizes.size());
}

}  // namespace
}  // namespace detinfer::kernels
