// The CPU implementations of the detinfer PyTorch operators (schemas in register.cpp).
// Each computes in binary32 with the canonical kernels (numerics spec v1), so every row
// of a result is independent of the other rows: slicing the batch never changes a bit.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace detinfer::torch_ops {

// --- linear algebra ---------------------------------------------------------------------
// a[M,K] @ b[K,N]; b is packed as W = b^T (PyTorch's nn.Linear layout) per call.
at::Tensor mm(const at::Tensor& a, const at::Tensor& b);
// beta * self + alpha * (a @ b), the product computed by mm; self broadcasts.
at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha);
// x[..., K] @ weight[N, K]^T (+ bias[N]); weight may be f32, bf16 or f16.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight,
                  const c10::optional<at::Tensor>& bias);

// --- row operations (over the last dimension unless `dim` says otherwise) ------------------
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype);
at::Tensor log_softmax(const at::Tensor& x, std::int64_t dim, c10::optional<at::ScalarType> dtype);
// Sum in the canonical chunked order (chunks of 64 from +0, partials added in order),
// divided by the count. No dim (or an empty list) reduces everything.
at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                c10::optional<at::ScalarType> dtype);
// silu(gate) * up, elementwise.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

// --- attention --------------------------------------------------------------------------
// One sequence, `rows` query rows over a paged KV cache:
//   q [rows, H, D]; k_cache/v_cache [num_blocks, block_size, Hkv, D] (f32);
//   block_table [nb] int; num_keys [rows] int (row r sees keys [0, num_keys[r])).
at::Tensor attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_table, const at::Tensor& num_keys, double scale);
// Batched decode: q [B, H, D], block_tables [B, max_blocks] int, context_lens [B] int.
at::Tensor paged_attention_decode(const at::Tensor& q, const at::Tensor& k_cache,
                                  const at::Tensor& v_cache, const at::Tensor& block_tables,
                                  const at::Tensor& context_lens, double scale);
// Dense causal prefill of one sequence: q [T, H, D], k/v [T, Hkv, D]; row t sees [0, t].
at::Tensor attention_prefill(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             double scale);

// --- aten override (aten_override.cpp) ----------------------------------------------------
// Routes aten::mm, addmm, _softmax, _log_softmax and mean.dim on CPU to the operators above
// (other dtypes fall through to PyTorch's own CPU kernels). Returns the previous state.
bool set_aten_override(bool enabled);
bool aten_override_enabled();

}  // namespace detinfer::torch_ops
