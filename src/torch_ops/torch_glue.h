// Shared plumbing of libdetinfer_torch.so: argument checks, dtype handling and the
// kernel thread pool. Only torch_ops TUs include libtorch.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "detinfer/error.h"
#include "kernels/kernels.h"

namespace detinfer {
class ThreadPool;
}

namespace detinfer::torch_ops {

// Threads of the kernels behind the operators: DETINFER_TORCH_THREADS, else
// at::get_num_threads() at first use. Results never depend on it (spec v1).
ThreadPool* kernel_pool();

// Floating dtypes the canonical kernels take (computed in binary32, widening exactly).
bool is_kernel_dtype(at::ScalarType t);

// Checks that `t` is a defined CPU tensor of a kernel dtype; `what` names the argument.
void check_cpu_float(const at::Tensor& t, const char* op, const char* what);

// The tensor as contiguous binary32 (a no-op for contiguous f32 tensors).
at::Tensor to_f32_contiguous(const at::Tensor& t);

// The kernel dtype of a weight tensor (f32, bf16 or f16).
kernels::DType kernel_dtype(at::ScalarType t);

// Runs fn, turning a detinfer::Error into a c10::Error (Python: RuntimeError) that names
// the operator.
template <typename F>
auto guarded(const char* op, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const detinfer::Error& e) {
    TORCH_CHECK(false, "detinfer::", op, ": ", e.what());
  }
}

}  // namespace detinfer::torch_ops
