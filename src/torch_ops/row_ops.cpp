// rms_norm, softmax, log_softmax, mean and silu_mul: one canonical kernel call per row,
// rows distributed over the pool (never a reduction split across threads).
#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "torch_ops/ops.h"
#include "torch_ops/torch_glue.h"

namespace detinfer::torch_ops {
namespace {

using RowFn = void (*)(const float*, float*, std::int64_t);

// Applies fn to every row of `x` along `dim`; the result is f32, contiguous, x's shape.
at::Tensor map_rows(const at::Tensor& x, std::int64_t dim, RowFn fn, const char* op) {
  check_cpu_float(x, op, "self");
  const std::int64_t nd = std::max<std::int64_t>(x.dim(), 1);
  dim = at::maybe_wrap_dim(dim, nd);
  const at::Tensor moved = x.dim() == 0 ? x.reshape({1}) : x.movedim(dim, -1);
  const at::Tensor src = to_f32_contiguous(moved);
  at::Tensor dst = at::empty_like(src);
  const std::int64_t n = src.dim() == 0 ? 1 : src.size(-1);
  const std::int64_t rows = n == 0 ? 0 : src.numel() / n;
  const float* in = src.data_ptr<float>();
  float* out = dst.data_ptr<float>();
  guarded(op, [&] {
    kernel_pool()->parallel_for(rows,
                                std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(n, 1)),
                                [&](std::int64_t r0, std::int64_t r1) {
                                  for (std::int64_t r = r0; r < r1; ++r)
                                    fn(in + r * n, out + r * n, n);
                                });
    return 0;
  });
  if (x.dim() == 0) return dst.reshape({});
  return dst.movedim(-1, dim).contiguous();
}

at::Tensor with_dtype(const at::Tensor& x, c10::optional<at::ScalarType> dtype) {
  return dtype.has_value() ? x.to(*dtype) : x;
}

}  // namespace

at::Tensor softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype) {
  const at::Tensor in = with_dtype(x, dtype);
  return map_rows(in, dim, &kernels::softmax, "softmax").to(in.scalar_type());
}

at::Tensor log_softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype) {
  const at::Tensor in = with_dtype(x, dtype);
  return map_rows(in, dim, &kernels::log_softmax, "log_softmax").to(in.scalar_type());
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_cpu_float(x, "rms_norm", "input");
  check_cpu_float(weight, "rms_norm", "weight");
  TORCH_CHECK(x.dim() >= 1, "detinfer::rms_norm: input must have at least 1 dimension");
  const std::int64_t n = x.size(-1);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, "detinfer::rms_norm: weight must be [", n,
              "], got ", weight.sizes());
  TORCH_CHECK(eps >= 0.0, "detinfer::rms_norm: eps must be >= 0, got ", eps);
  const at::Tensor src = to_f32_contiguous(x);
  const at::Tensor w = to_f32_contiguous(weight);
  at::Tensor dst = at::empty_like(src);
  const std::int64_t rows = n == 0 ? 0 : src.numel() / n;
  if (rows == 0) return dst.to(x.scalar_type());
  guarded("rms_norm", [&] {
    kernels::rms_norm(src.data_ptr<float>(), n, w.data_ptr<float>(), static_cast<float>(eps),
                      dst.data_ptr<float>(), n, rows, n, kernel_pool());
    return 0;
  });
  return dst.to(x.scalar_type());
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  check_cpu_float(gate, "silu_mul", "gate");
  check_cpu_float(up, "silu_mul", "up");
  TORCH_CHECK(gate.sizes() == up.sizes(), "detinfer::silu_mul: gate ", gate.sizes(), " and up ",
              up.sizes(), " differ in shape");
  const at::Tensor g = to_f32_contiguous(gate);
  const at::Tensor u = to_f32_contiguous(up);
  at::Tensor out = at::empty_like(g);
  const float* gp = g.data_ptr<float>();
  const float* upp = u.data_ptr<float>();
  float* op = out.data_ptr<float>();
  guarded("silu_mul", [&] {
    // Elementwise: any split gives the same bits.
    kernel_pool()->parallel_for(g.numel(), 16384, [&](std::int64_t i0, std::int64_t i1) {
      kernels::silu_mul(gp + i0, upp + i0, op + i0, i1 - i0);
    });
    return 0;
  });
  return out.to(gate.scalar_type());
}

at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                c10::optional<at::ScalarType> dtype) {
  check_cpu_float(x, "mean", "self");
  const std::int64_t nd = x.dim();
  // Reduced dims, wrapped and deduplicated; none (or an empty list) means all.
  std::vector<bool> reduced(static_cast<std::size_t>(nd), false);
  if (dim.has_value() && !dim->empty()) {
    for (std::int64_t d : *dim) {
      const std::int64_t w = at::maybe_wrap_dim(d, std::max<std::int64_t>(nd, 1));
      TORCH_CHECK(nd == 0 || !reduced[w], "detinfer::mean: dim ", d, " appears twice");
      if (nd > 0) reduced[w] = true;
    }
  } else {
    std::fill(reduced.begin(), reduced.end(), true);
  }
  // Kept dims first, reduced dims last, so each output element reduces one contiguous row.
  std::vector<std::int64_t> perm;
  std::vector<std::int64_t> out_shape;
  std::vector<std::int64_t> keep_shape;
  std::int64_t inner = 1;
  for (std::int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      out_shape.push_back(x.size(d));
      keep_shape.push_back(x.size(d));
    } else {
      keep_shape.push_back(1);
    }
  }
  for (std::int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      perm.push_back(d);
      inner *= x.size(d);
    }
  }
  const at::Tensor src = to_f32_contiguous(nd == 0 ? x : x.permute(perm));
  const std::int64_t outer = inner == 0 ? c10::multiply_integers(out_shape) : src.numel() / inner;
  at::Tensor out = at::empty({outer}, x.options().dtype(at::kFloat));
  // dot(row, ones) is the canonical chunked sum: fma(v, 1, p) rounds exactly like p + v.
  const std::vector<float> ones(static_cast<std::size_t>(std::max<std::int64_t>(inner, 1)), 1.0f);
  const float* in = src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  guarded("mean", [&] {
    kernel_pool()->parallel_for(
        outer, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(inner, 1)),
        [&](std::int64_t r0, std::int64_t r1) {
          for (std::int64_t r = r0; r < r1; ++r) {
            const float s = inner == 0 ? 0.0f : kernels::dot(in + r * inner, ones.data(), inner);
            o[r] = s / static_cast<float>(inner);
          }
        });
    return 0;
  });
  at::Tensor result = out.view(keepdim ? keep_shape : out_shape);
  return result.to(dtype.value_or(x.scalar_type()));
}

}  // namespace detinfer::torch_ops
