// mm / addmm / linear on kernels::PackedLinear: every output element is the canonical
// chunked dot product of one row and one column, so a row's result never depends on M.
#include <ATen/ATen.h>

#include "kernels/kernels.h"
#include "torch_ops/ops.h"
#include "torch_ops/torch_glue.h"

namespace detinfer::torch_ops {
namespace {

// y[M,N] (f32) = x[M,K] @ w[N,K]^T (+ bias). x is taken with its row stride when it is
// already f32 with unit column stride (no copy for the common case).
at::Tensor linear_2d(const at::Tensor& x, const at::Tensor& w_nk, const at::Tensor& bias,
                     const char* op) {
  const std::int64_t m = x.size(0);
  const std::int64_t k = x.size(1);
  const std::int64_t n = w_nk.size(0);
  TORCH_CHECK(w_nk.size(1) == k, "detinfer::", op, ": inner dimensions differ (", k, " vs ",
              w_nk.size(1), ")");
  at::Tensor b32;
  if (bias.defined()) {
    check_cpu_float(bias, op, "bias");
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == n, "detinfer::", op, ": bias must have shape [",
                n, "], got ", bias.sizes());
    b32 = to_f32_contiguous(bias);
  }
  at::Tensor y = at::empty({m, n}, x.options().dtype(at::kFloat));
  if (m == 0 || n == 0) return y;
  if (k == 0) {
    y.zero_();
    if (b32.defined()) y.add_(b32);
    return y;
  }
  at::Tensor xf = x;
  if (xf.scalar_type() != at::kFloat || xf.stride(1) != 1 || xf.stride(0) < k) {
    xf = to_f32_contiguous(x);
  }
  const at::Tensor w = w_nk.contiguous();
  return guarded(op, [&] {
    const auto packed =
        kernels::PackedLinear::pack(w.data_ptr(), kernel_dtype(w.scalar_type()), n, k,
                                    b32.defined() ? b32.data_ptr<float>() : nullptr);
    packed.run(xf.data_ptr<float>(), xf.stride(0), m, y.data_ptr<float>(), n, kernel_pool());
    return y;
  });
}

void check_matrix(const at::Tensor& t, const char* op, const char* what) {
  check_cpu_float(t, op, what);
  TORCH_CHECK(t.dim() == 2, "detinfer::", op, ": ", what, " must be 2-D, got ", t.dim(), "-D");
}

}  // namespace

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  check_matrix(a, "mm", "self");
  check_matrix(b, "mm", "mat2");
  TORCH_CHECK(a.size(1) == b.size(0), "detinfer::mm: shapes ", a.sizes(), " and ", b.sizes(),
              " cannot be multiplied");
  return linear_2d(a, b.t(), at::Tensor(), "mm").to(a.scalar_type());
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  check_matrix(a, "addmm", "mat1");
  check_matrix(b, "addmm", "mat2");
  check_cpu_float(self, "addmm", "self");
  TORCH_CHECK(a.size(1) == b.size(0), "detinfer::addmm: shapes ", a.sizes(), " and ", b.sizes(),
              " cannot be multiplied");
  at::Tensor y = linear_2d(a, b.t(), at::Tensor(), "addmm");
  // Elementwise from here on: each output element still depends on its own row only.
  if (alpha.toDouble() != 1.0) y.mul_(alpha);
  if (beta.toDouble() != 0.0) {
    const at::Tensor s = self.to(at::kFloat);
    if (beta.toDouble() == 1.0) {
      y.add_(s);
    } else {
      y.add_(s * beta);
    }
  }
  return y.to(a.scalar_type());
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight,
                  const c10::optional<at::Tensor>& bias) {
  check_cpu_float(x, "linear", "input");
  check_matrix(weight, "linear", "weight");
  TORCH_CHECK(x.dim() >= 1, "detinfer::linear: input must have at least 1 dimension");
  const std::int64_t k = x.size(-1);
  TORCH_CHECK(weight.size(1) == k, "detinfer::linear: input has ", k, " features but weight is ",
              weight.sizes());
  const at::Tensor x2 = x.reshape({-1, k});
  const at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  at::Tensor y = linear_2d(x2, weight, b, "linear");
  auto out_shape = x.sizes().vec();
  out_shape.back() = weight.size(0);
  return y.view(out_shape).to(x.scalar_type());
}

}  // namespace detinfer::torch_ops
