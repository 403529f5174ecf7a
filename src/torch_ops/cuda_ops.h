// CUDA implementations of the detinfer operators (cuda_ops.cpp), declared for the aten
// override. Only compiled with DETINFER_TORCH_CUDA (a CUDA-enabled libtorch).
#pragma once

#ifdef DETINFER_TORCH_CUDA

#include <ATen/ATen.h>

#include <cstdint>

namespace detinfer::torch_ops::cuda_impl {

at::Tensor mm(const at::Tensor& a, const at::Tensor& b);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight,
                  const c10::optional<at::Tensor>& bias);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype);
at::Tensor log_softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype);
at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                c10::optional<at::ScalarType> dtype);
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);
at::Tensor attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_table, const at::Tensor& num_keys, double scale);
at::Tensor paged_attention_decode(const at::Tensor& q, const at::Tensor& k_cache,
                                  const at::Tensor& v_cache, const at::Tensor& block_tables,
                                  const at::Tensor& context_lens, double scale);
at::Tensor attention_prefill(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             double scale);

}  // namespace detinfer::torch_ops::cuda_impl

#endif  // DETINFER_TORCH_CUDA
