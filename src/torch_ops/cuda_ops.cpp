// CUDA kernels of the detinfer operators (kernels/cuda canonical family: bitwise equal to
// the CPU operators for the same inputs). Compiled only against a CUDA-enabled libtorch
// (DETINFER_TORCH_CUDA); Debian's libtorch is CPU-only, so this file has not been run in
// detinfer's CI. Indices (block tables, key counts) are validated on the host first, as
// on the CPU: the kernels trust their inputs.
#ifdef DETINFER_TORCH_CUDA

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "torch_ops/attention_common.h"
#include "torch_ops/torch_glue.h"

namespace detinfer::torch_ops::cuda_impl {
namespace kc = detinfer::kernels::cuda;
namespace {

kc::Stream stream() { return at::cuda::getCurrentCUDAStream().stream(); }

void check_cuda_float(const at::Tensor& t, const char* op, const char* what) {
  TORCH_CHECK(t.defined() && t.is_cuda(), "detinfer::", op, ": ", what, " must be a CUDA tensor");
  TORCH_CHECK(is_kernel_dtype(t.scalar_type()), "detinfer::", op, ": ", what,
              " must be float32, bfloat16 or float16, got ", t.scalar_type());
}

at::Tensor f32(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

// y[M,N] f32 = x[M,K] @ w[N,K]^T (+ bias).
at::Tensor linear_2d(const at::Tensor& x, const at::Tensor& w_nk, const at::Tensor& bias,
                     const char* op) {
  const std::int64_t m = x.size(0), k = x.size(1), n = w_nk.size(0);
  TORCH_CHECK(w_nk.size(1) == k, "detinfer::", op, ": inner dimensions differ");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::zeros({m, n}, x.options().dtype(at::kFloat));
  at::Tensor b32;
  if (bias.defined()) {
    check_cuda_float(bias, op, "bias");
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == n, "detinfer::", op, ": bias must be [", n, "]");
    b32 = f32(bias);
  }
  if (m == 0 || n == 0) return y;
  if (k == 0) return b32.defined() ? y.add_(b32) : y;
  const at::Tensor xf = f32(x);
  const at::Tensor w = w_nk.contiguous();
  guarded(op, [&] {
    kc::linear(xf.data_ptr<float>(), k, m, w.data_ptr(), kernel_dtype(w.scalar_type()), n, k,
               b32.defined() ? b32.data_ptr<float>() : nullptr, y.data_ptr<float>(), n, stream());
    return 0;
  });
  return y;
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  check_cuda_float(a, "mm", "self");
  check_cuda_float(b, "mm", "mat2");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "detinfer::mm: shapes ",
              a.sizes(), " and ", b.sizes(), " cannot be multiplied");
  return linear_2d(a, b.t(), at::Tensor(), "mm").to(a.scalar_type());
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  check_cuda_float(self, "addmm", "self");
  check_cuda_float(a, "addmm", "mat1");
  check_cuda_float(b, "addmm", "mat2");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "detinfer::addmm: shapes ",
              a.sizes(), " and ", b.sizes(), " cannot be multiplied");
  at::Tensor y = linear_2d(a, b.t(), at::Tensor(), "addmm");
  if (alpha.toDouble() != 1.0) y.mul_(alpha);
  if (beta.toDouble() != 0.0) {
    const at::Tensor s = self.to(at::kFloat);
    beta.toDouble() == 1.0 ? y.add_(s) : y.add_(s * beta);
  }
  return y.to(a.scalar_type());
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight,
                  const c10::optional<at::Tensor>& bias) {
  check_cuda_float(x, "linear", "input");
  check_cuda_float(weight, "linear", "weight");
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && weight.size(1) == x.size(-1),
              "detinfer::linear: input ", x.sizes(), " does not match weight ", weight.sizes());
  at::Tensor y = linear_2d(x.reshape({-1, x.size(-1)}), weight,
                           bias.has_value() ? *bias : at::Tensor(), "linear");
  auto shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return y.view(shape).to(x.scalar_type());
}

using RowKernel = void (*)(const float*, std::int64_t, float*, std::int64_t, std::int64_t,
                           std::int64_t, kc::Stream);

at::Tensor rows_op(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype,
                   RowKernel fn, const char* op) {
  const at::Tensor in = dtype.has_value() ? x.to(*dtype) : x;
  check_cuda_float(in, op, "self");
  const c10::cuda::CUDAGuard guard(in.device());
  dim = at::maybe_wrap_dim(dim, std::max<std::int64_t>(in.dim(), 1));
  const at::Tensor src = f32(in.dim() == 0 ? in.reshape({1}) : in.movedim(dim, -1));
  at::Tensor dst = at::empty_like(src);
  const std::int64_t n = src.size(-1);
  TORCH_CHECK(n <= kc::kMaxRowLength, "detinfer::", op, ": rows of ", n, " exceed ",
              kc::kMaxRowLength);
  const std::int64_t rows = n == 0 ? 0 : src.numel() / n;
  if (rows > 0) {
    guarded(op, [&] {
      fn(src.data_ptr<float>(), n, dst.data_ptr<float>(), n, rows, n, stream());
      return 0;
    });
  }
  const at::Tensor out = in.dim() == 0 ? dst.reshape({}) : dst.movedim(-1, dim).contiguous();
  return out.to(in.scalar_type());
}

at::Tensor softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype) {
  return rows_op(x, dim, dtype, &kc::softmax, "softmax");
}

at::Tensor log_softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype) {
  return rows_op(x, dim, dtype, &kc::log_softmax, "log_softmax");
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_cuda_float(x, "rms_norm", "input");
  check_cuda_float(weight, "rms_norm", "weight");
  const std::int64_t n = x.size(-1);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, "detinfer::rms_norm: weight must be [", n,
              "]");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor src = f32(x), w = f32(weight);
  at::Tensor dst = at::empty_like(src);
  const std::int64_t rows = n == 0 ? 0 : src.numel() / n;
  if (rows > 0) {
    guarded("rms_norm", [&] {
      kc::rms_norm(src.data_ptr<float>(), n, w.data_ptr<float>(), static_cast<float>(eps),
                   dst.data_ptr<float>(), n, rows, n, stream());
      return 0;
    });
  }
  return dst.to(x.scalar_type());
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  check_cuda_float(gate, "silu_mul", "gate");
  check_cuda_float(up, "silu_mul", "up");
  TORCH_CHECK(gate.sizes() == up.sizes(), "detinfer::silu_mul: shapes differ");
  const c10::cuda::CUDAGuard guard(gate.device());
  const at::Tensor g = f32(gate), u = f32(up);
  at::Tensor out = at::empty_like(g);
  if (g.numel() > 0) {
    guarded("silu_mul", [&] {
      kc::silu_mul(g.data_ptr<float>(), u.data_ptr<float>(), out.data_ptr<float>(), g.numel(),
                   stream());
      return 0;
    });
  }
  return out.to(gate.scalar_type());
}

// The canonical sum is dot(row, ones): one linear with a single all-ones weight row.
at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                c10::optional<at::ScalarType> dtype) {
  check_cuda_float(x, "mean", "self");
  const std::int64_t nd = x.dim();
  std::vector<bool> reduced(static_cast<std::size_t>(nd), !dim.has_value() || dim->empty());
  if (dim.has_value()) {
    for (std::int64_t d : *dim)
      reduced[at::maybe_wrap_dim(d, std::max<std::int64_t>(nd, 1))] = true;
  }
  std::vector<std::int64_t> perm, out_shape, keep_shape;
  std::int64_t inner = 1;
  for (std::int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) perm.push_back(d), out_shape.push_back(x.size(d));
    keep_shape.push_back(reduced[d] ? 1 : x.size(d));
  }
  for (std::int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) perm.push_back(d), inner *= x.size(d);
  }
  const at::Tensor src = (nd == 0 ? x : x.permute(perm)).reshape({-1, inner});
  const at::Tensor ones = at::ones({1, inner}, x.options().dtype(at::kFloat));
  at::Tensor sum = linear_2d(src, ones, at::Tensor(), "mean");
  at::Tensor out = sum.div_(static_cast<double>(static_cast<float>(inner)));
  return out.view(keepdim ? keep_shape : out_shape).to(dtype.value_or(x.scalar_type()));
}

struct Cache {
  std::int64_t blocks, block_size, kv_heads, head_dim;
};

// The CUDA policy of the shared operator bodies (attention_common.h).
struct CudaAttention {
  using Cache = cuda_impl::Cache;
  using Guard = c10::cuda::CUDAGuard;

  static Cache check_cache(const at::Tensor& k, const at::Tensor& v, const char* op) {
    TORCH_CHECK(k.is_cuda() && v.is_cuda() && k.scalar_type() == at::kFloat &&
                    v.scalar_type() == at::kFloat && k.dim() == 4 && k.sizes() == v.sizes() &&
                    k.is_contiguous() && v.is_contiguous(),
                "detinfer::", op,
                ": k_cache/v_cache must be contiguous float32 CUDA tensors "
                "[num_blocks, block_size, num_kv_heads, head_dim] of one shape");
    TORCH_CHECK(k.size(3) <= kc::kMaxHeadDim, "detinfer::", op, ": head_dim ", k.size(3),
                " exceeds ", kc::kMaxHeadDim);
    return {k.size(0), k.size(1), k.size(2), k.size(3)};
  }

  static at::Tensor check_q(const at::Tensor& q, const Cache& c, const char* op) {
    check_cuda_float(q, op, "q");
    TORCH_CHECK(q.dim() == 3 && q.size(2) == c.head_dim && q.size(1) % c.kv_heads == 0,
                "detinfer::", op,
                ": q must be [rows, num_heads, head_dim] with num_heads a "
                "multiple of num_kv_heads, got ",
                q.sizes());
    return f32(q);
  }

  // The values of an index tensor on any device, copied to the host.
  static std::vector<std::int64_t> ints(const at::Tensor& t, const char*, const char*) {
    const at::Tensor c = t.to(at::kCPU).to(at::kLong).contiguous();
    return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
  }

  // Rows [row0, row0 + rows) of qf into the same rows of out, one sequence: validates the
  // host copies of its table and key counts, then launches.
  static void run(const at::Tensor& qf, std::int64_t row0, std::int64_t rows,
                  const std::vector<std::int64_t>& keys, const std::vector<std::int64_t>& table,
                  const at::Tensor& k_cache, const at::Tensor& v_cache, const Cache& c,
                  double scale, at::Tensor& out, const char* op) {
    const std::vector<std::int32_t> blocks =
        checked_blocks(keys, table, c.block_size, c.blocks, op);
    const auto dev = qf.options();
    const at::Tensor d_blocks = at::tensor(blocks, dev.dtype(at::kInt));
    const at::Tensor d_keys = at::tensor(keys, dev.dtype(at::kLong));
    kernels::PagedKvView kv;
    kv.k_pool = k_cache.data_ptr<float>();
    kv.v_pool = v_cache.data_ptr<float>();
    kv.block_table = d_blocks.data_ptr<std::int32_t>();
    kv.num_blocks = static_cast<std::int64_t>(blocks.size());
    kv.block_size = c.block_size;
    kv.num_kv_heads = c.kv_heads;
    kv.head_dim = c.head_dim;
    const std::int64_t heads = qf.size(1);
    const std::int64_t ld = heads * c.head_dim;
    guarded(op, [&] {
      kc::attention(qf.data_ptr<float>() + row0 * ld, ld, rows, d_keys.data_ptr<std::int64_t>(),
                    heads, kv, static_cast<float>(scale), out.data_ptr<float>() + row0 * ld, ld,
                    stream());
      return 0;
    });
  }
};

at::Tensor attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_table, const at::Tensor& num_keys, double scale) {
  return attention_op(CudaAttention{}, q, k_cache, v_cache, block_table, num_keys, scale);
}

at::Tensor paged_attention_decode(const at::Tensor& q, const at::Tensor& k_cache,
                                  const at::Tensor& v_cache, const at::Tensor& block_tables,
                                  const at::Tensor& context_lens, double scale) {
  return paged_attention_decode_op(CudaAttention{}, q, k_cache, v_cache, block_tables, context_lens,
                                   scale);
}

at::Tensor attention_prefill(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             double scale) {
  const char* op = "attention_prefill";
  TORCH_CHECK(k.dim() == 3 && k.sizes() == v.sizes() && q.dim() == 3 && q.size(0) == k.size(0),
              "detinfer::", op, ": q [T, H, D], k and v [T, Hkv, D] expected");
  const std::int64_t t = k.size(0);
  if (t == 0) return at::empty_like(q);
  const c10::cuda::CUDAGuard guard(q.device());
  const at::Tensor kc_ = f32(k).unsqueeze(0), vc = f32(v).unsqueeze(0);
  const Cache c = CudaAttention::check_cache(kc_, vc, op);
  const at::Tensor qf = CudaAttention::check_q(q, c, op);
  std::vector<std::int64_t> keys(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i) keys[i] = i + 1;
  at::Tensor out = at::empty_like(qf);
  CudaAttention::run(qf, 0, t, keys, {0}, kc_, vc, c, scale, out, op);
  return out.to(q.scalar_type());
}

}  // namespace
}  // namespace detinfer::torch_ops::cuda_impl

TORCH_LIBRARY_IMPL(detinfer, CUDA, m) {
  DETINFER_TORCH_IMPL_ALL(m, detinfer::torch_ops::cuda_impl);
}

#endif  // DETINFER_TORCH_CUDA
