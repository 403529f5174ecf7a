// The `detinfer` operator namespace: torch.ops.detinfer.* once libdetinfer_torch.so is
// loaded (torch.ops.load_library). CPU kernels here; CUDA kernels in cuda_ops.cpp when
// built against a CUDA-enabled libtorch.
#include <torch/library.h>

#include <string>

#include "kernels/kernels.h"
#include "torch_ops/ops.h"
#include "torch_ops/torch_glue.h"

namespace detinfer::torch_ops {
namespace {

std::int64_t numerics_spec_version() { return 1; }

std::string cpu_isa() { return kernels::to_string(kernels::active_isa()); }

// For tests and debugging: results are the same bits with every ISA (spec v1).
std::string set_cpu_isa(const std::string& name) {
  const std::string previous = cpu_isa();
  kernels::Isa isa;
  if (name == "scalar") {
    isa = kernels::Isa::kScalar;
  } else if (name == "avx2") {
    isa = kernels::Isa::kAvx2;
  } else if (name == "avx512") {
    isa = kernels::Isa::kAvx512;
  } else {
    TORCH_CHECK(false, "detinfer::set_cpu_isa: unknown ISA '", name, "' (scalar, avx2 or avx512)");
  }
  guarded("set_cpu_isa", [&] {
    kernels::set_isa(isa);
    return 0;
  });
  return previous;
}

}  // namespace
}  // namespace detinfer::torch_ops

TORCH_LIBRARY(detinfer, m) {
  m.def("mm(Tensor self, Tensor mat2) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  m.def("rms_norm(Tensor input, Tensor weight, float eps=1e-06) -> Tensor");
  m.def("softmax(Tensor self, int dim=-1, *, ScalarType? dtype=None) -> Tensor");
  m.def("log_softmax(Tensor self, int dim=-1, *, ScalarType? dtype=None) -> Tensor");
  m.def(
      "mean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor");
  m.def("silu_mul(Tensor gate, Tensor up) -> Tensor");
  m.def(
      "attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, "
      "Tensor num_keys, float scale) -> Tensor");
  m.def(
      "paged_attention_decode(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, "
      "Tensor context_lens, float scale) -> Tensor");
  m.def("attention_prefill(Tensor q, Tensor k, Tensor v, float scale) -> Tensor");
  // No tensor arguments: catch-all kernels.
  m.def("set_aten_override(bool enabled) -> bool", &detinfer::torch_ops::set_aten_override);
  m.def("aten_override_enabled() -> bool", &detinfer::torch_ops::aten_override_enabled);
  m.def("numerics_spec_version() -> int", &detinfer::torch_ops::numerics_spec_version);
  m.def("cpu_isa() -> str", &detinfer::torch_ops::cpu_isa);
  m.def("set_cpu_isa(str isa) -> str", &detinfer::torch_ops::set_cpu_isa);
}

TORCH_LIBRARY_IMPL(detinfer, CPU, m) { DETINFER_TORCH_IMPL_ALL(m, detinfer::torch_ops); }
