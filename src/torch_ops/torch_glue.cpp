#include "torch_ops/torch_glue.h"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "core/thread_pool.h"

namespace detinfer::torch_ops {

core::ThreadPool* kernel_pool() {
  static const std::unique_ptr<core::ThreadPool> pool = [] {
    int threads = at::get_num_threads();
    if (const char* env = std::getenv("DETINFER_TORCH_THREADS")) {
      threads = std::atoi(env);
    }
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    return std::make_unique<core::ThreadPool>(threads);
  }();
  return pool.get();
}

bool is_kernel_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

void check_cpu_float(const at::Tensor& t, const char* op, const char* what) {
  TORCH_CHECK(t.defined(), "detinfer::", op, ": ", what, " is undefined");
  TORCH_CHECK(t.device().is_cpu(), "detinfer::", op, ": ", what, " must be a CPU tensor, got ",
              t.device());
  TORCH_CHECK(is_kernel_dtype(t.scalar_type()), "detinfer::", op, ": ", what,
              " must be float32, bfloat16 or float16, got ", t.scalar_type());
}

at::Tensor to_f32_contiguous(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

core::DType kernel_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return core::DType::kBF16;
    case at::kHalf:
      return core::DType::kF16;
    default:
      return core::DType::kF32;
  }
}

}  // namespace detinfer::torch_ops
