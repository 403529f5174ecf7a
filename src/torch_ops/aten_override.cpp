// A scoped override of aten's CPU (and, with a CUDA-enabled libtorch, CUDA) kernels:
// while enabled, aten::mm, addmm, _softmax, _log_softmax and mean.dim run detinfer's
// batch-invariant operators, so an unmodified torch.nn model gives the same bits for a row
// whatever the batch. aten::linear and aten::matmul need no entry: they decompose into
// mm/addmm.
//
// The kernels are registered on a torch::Library object; destroying it deregisters them
// and PyTorch's own kernels come back. Tensors the canonical kernels don't take (double,
// integer, complex) go to PyTorch's kernels directly (at::cpu::*, at::cuda::*), not the dispatcher,
// so the override never recurses.
#include <ATen/ATen.h>
#include <ATen/CPUFunctions.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "torch_ops/ops.h"
#include "torch_ops/torch_glue.h"

#ifdef DETINFER_TORCH_CUDA
#include <ATen/CUDAFunctions.h>
#include <ATen/core/dispatch/Dispatcher.h>
#endif

namespace detinfer::torch_ops {
namespace {

bool routable(const at::Tensor& t) {
  return t.defined() && t.layout() == at::kStrided && t.device().is_cpu() &&
         is_kernel_dtype(t.scalar_type());
}

at::Tensor aten_mm(const at::Tensor& a, const at::Tensor& b) {
  if (routable(a) && routable(b) && a.scalar_type() == b.scalar_type()) return torch_ops::mm(a, b);
  return at::cpu::mm(a, b);
}

at::Tensor aten_addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  if (routable(self) && routable(a) && routable(b) && a.scalar_type() == b.scalar_type()) {
    return torch_ops::addmm(self, a, b, beta, alpha);
  }
  return at::cpu::addmm(self, a, b, beta, alpha);
}

at::Tensor aten_softmax(const at::Tensor& x, std::int64_t dim, bool half_to_float) {
  if (!routable(x)) return at::cpu::_softmax(x, dim, half_to_float);
  const at::Tensor y = torch_ops::softmax(x, dim, c10::nullopt);
  return half_to_float ? y.to(at::kFloat) : y;
}

at::Tensor aten_log_softmax(const at::Tensor& x, std::int64_t dim, bool half_to_float) {
  if (!routable(x)) return at::cpu::_log_softmax(x, dim, half_to_float);
  const at::Tensor y = torch_ops::log_softmax(x, dim, c10::nullopt);
  return half_to_float ? y.to(at::kFloat) : y;
}

at::Tensor aten_mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                     c10::optional<at::ScalarType> dtype) {
  if (!routable(x) || (dtype.has_value() && !is_kernel_dtype(*dtype))) {
    return at::cpu::mean(x, dim, keepdim, dtype);
  }
  return torch_ops::mean(x, dim, keepdim, dtype);
}

#ifdef DETINFER_TORCH_CUDA
// The same routing for CUDA tensors, to the detinfer operators' CUDA kernels through the
// dispatcher (cuda_ops.cpp). Unverified: needs a CUDA-enabled libtorch.
bool cuda_routable(const at::Tensor& t) {
  return t.defined() && t.layout() == at::kStrided && t.is_cuda() &&
         is_kernel_dtype(t.scalar_type());
}

template <typename Signature>
c10::TypedOperatorHandle<Signature> detinfer_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

at::Tensor aten_mm_cuda(const at::Tensor& a, const at::Tensor& b) {
  if (!cuda_routable(a) || !cuda_routable(b) || a.scalar_type() != b.scalar_type()) {
    return at::cuda::mm(a, b);
  }
  static const auto op =
      detinfer_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("detinfer::mm");
  return op.call(a, b);
}

at::Tensor aten_addmm_cuda(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                           const at::Scalar& beta, const at::Scalar& alpha) {
  if (!cuda_routable(self) || !cuda_routable(a) || !cuda_routable(b) ||
      a.scalar_type() != b.scalar_type()) {
    return at::cuda::addmm(self, a, b, beta, alpha);
  }
  static const auto op =
      detinfer_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                             const at::Scalar&, const at::Scalar&)>("detinfer::addmm");
  return op.call(self, a, b, beta, alpha);
}

using RowSignature = at::Tensor(const at::Tensor&, std::int64_t, c10::optional<at::ScalarType>);

at::Tensor aten_softmax_cuda(const at::Tensor& x, std::int64_t dim, bool half_to_float) {
  if (!cuda_routable(x)) return at::cuda::_softmax(x, dim, half_to_float);
  static const auto op = detinfer_op<RowSignature>("detinfer::softmax");
  const at::Tensor y = op.call(x, dim, c10::nullopt);
  return half_to_float ? y.to(at::kFloat) : y;
}

at::Tensor aten_log_softmax_cuda(const at::Tensor& x, std::int64_t dim, bool half_to_float) {
  if (!cuda_routable(x)) return at::cuda::_log_softmax(x, dim, half_to_float);
  static const auto op = detinfer_op<RowSignature>("detinfer::log_softmax");
  const at::Tensor y = op.call(x, dim, c10::nullopt);
  return half_to_float ? y.to(at::kFloat) : y;
}

at::Tensor aten_mean_cuda(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                          c10::optional<at::ScalarType> dtype) {
  if (!cuda_routable(x) || (dtype.has_value() && !is_kernel_dtype(*dtype))) {
    return at::cuda::mean(x, dim, keepdim, dtype);
  }
  static const auto op = detinfer_op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool,
                                                c10::optional<at::ScalarType>)>("detinfer::mean");
  return op.call(x, dim, keepdim, dtype);
}
#endif

// PyTorch warns when a kernel replaces another one for the same key; here that is the
// point, so the warning is dropped while registering.
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::SourceLocation&, const std::string&, const bool) override {}
};

std::mutex& override_mutex() {
  static std::mutex mu;
  return mu;
}

// One registration library per dispatch key; empty when the override is off.
std::vector<std::unique_ptr<torch::Library>>& override_libraries() {
  static std::vector<std::unique_ptr<torch::Library>> libs;
  return libs;
}

}  // namespace

bool set_aten_override(bool enabled) {
  std::lock_guard<std::mutex> lock(override_mutex());
  auto& libs = override_libraries();
  const bool previous = !libs.empty();
  SilentWarnings silent;
  c10::Warning::WarningHandlerGuard guard(&silent);
  if (enabled && libs.empty()) {
    auto cpu = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::CPU,
                                                __FILE__, __LINE__);
    cpu->impl("mm", TORCH_FN(aten_mm));
    cpu->impl("addmm", TORCH_FN(aten_addmm));
    cpu->impl("_softmax", TORCH_FN(aten_softmax));
    cpu->impl("_log_softmax", TORCH_FN(aten_log_softmax));
    cpu->impl("mean.dim", TORCH_FN(aten_mean));
    libs.push_back(std::move(cpu));
#ifdef DETINFER_TORCH_CUDA
    auto cuda = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                 c10::DispatchKey::CUDA, __FILE__, __LINE__);
    cuda->impl("mm", TORCH_FN(aten_mm_cuda));
    cuda->impl("addmm", TORCH_FN(aten_addmm_cuda));
    cuda->impl("_softmax", TORCH_FN(aten_softmax_cuda));
    cuda->impl("_log_softmax", TORCH_FN(aten_log_softmax_cuda));
    cuda->impl("mean.dim", TORCH_FN(aten_mean_cuda));
    libs.push_back(std::move(cuda));
#endif
  } else if (!enabled) {
    libs.clear();  // deregisters: PyTorch's own kernels serve again
  }
  return previous;
}

bool aten_override_enabled() {
  std::lock_guard<std::mutex> lock(override_mutex());
  return !override_libraries().empty();
}

}  // namespace detinfer::torch_ops
