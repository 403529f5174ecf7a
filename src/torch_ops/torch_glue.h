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

namespace detinfer::core {
class ThreadPool;
}

namespace detinfer::torch_ops {

// Threads of the kernels behind the operators: DETINFER_TORCH_THREADS, else
// at::get_num_threads() at first use. Results never depend on it (spec v1).
core::ThreadPool* kernel_pool();

// Floating dtypes the canonical kernels take (computed in binary32, widening exactly).
bool is_kernel_dtype(at::ScalarType t);

// Checks that `t` is a defined CPU tensor of a kernel dtype; `what` names the argument.
void check_cpu_float(const at::Tensor& t, const char* op, const char* what);

// The tensor as contiguous binary32 (a no-op for contiguous f32 tensors).
at::Tensor to_f32_contiguous(const at::Tensor& t);

// The kernel dtype of a weight tensor (f32, bf16 or f16).
core::DType kernel_dtype(at::ScalarType t);

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

// Registers every detinfer operator that has a kernel per device, taking each from the
// namespace `ns`, on the handle `m` of a TORCH_LIBRARY_IMPL block: the one list for the
// CPU kernels (register.cpp) and the CUDA kernels (cuda_ops.cpp), so both implement the
// same operators. Needs <torch/library.h>.
#define DETINFER_TORCH_IMPL_ALL(m, ns)                                        \
  do {                                                                        \
    (m).impl("mm", TORCH_FN(ns::mm));                                         \
    (m).impl("addmm", TORCH_FN(ns::addmm));                                   \
    (m).impl("linear", TORCH_FN(ns::linear));                                 \
    (m).impl("rms_norm", TORCH_FN(ns::rms_norm));                             \
    (m).impl("softmax", TORCH_FN(ns::softmax));                               \
    (m).impl("log_softmax", TORCH_FN(ns::log_softmax));                       \
    (m).impl("mean", TORCH_FN(ns::mean));                                     \
    (m).impl("silu_mul", TORCH_FN(ns::silu_mul));                             \
    (m).impl("attention", TORCH_FN(ns::attention));                           \
    (m).impl("paged_attention_decode", TORCH_FN(ns::paged_attention_decode)); \
    (m).impl("attention_prefill", TORCH_FN(ns::attention_prefill));           \
  } while (0)
