// The pieces of the fast forward pass (libtorch) that fast_model.cpp composes into the
// layers: the one-row linear, RMSNorm, RoPE, the gated MLP, attention over the paged KV
// pool and the mixture-of-experts MLP. Speed over bit-reproducibility: the composition is
// canonical mode's (docs/numerics.md, "Model composition"), the arithmetic libtorch's.
// Internal to the fast_*.cpp TUs (the only ones of the model that include libtorch).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace detinfer::model::fast {

// y = x W^T (+ b) for x [rows, in]; one row goes through at::mv (BLAS gemv).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = at::Tensor());

// x / sqrt(mean(x^2) + eps) * w over the last dimension.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, float eps);

// x: [rows, heads, hd]; cos/sin: [rows, 1, rd/2]: the first rd dims of each head rotate.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// down(act(gate x) * up x), act = silu or (Gemma) gelu with the tanh approximation.
at::Tensor gated_mlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                     const at::Tensor& down, Activation act);

// Writes the step's K and V ([rows, kv_heads * head_dim], contiguous f32) into layer li's
// pool and attends every sequence's rows (causal, GQA; a windowed layer's row at position
// p sees keys (p - sliding_window, p]; Gemma 2: scores soft-capped before the mask) with
// q [rows, num_heads, head_dim]; returns [rows, num_heads * head_dim].
at::Tensor attend(const ModelConfig& c, float scale, const at::Tensor& q, const at::Tensor& k,
                  const at::Tensor& v, const BatchPlan& plan, KvCachePool& kv, std::int64_t li);

// One layer's sparse MLP (Qwen3-MoE, Mixtral, Qwen2-MoE), weights widened to f32.
struct MoeTensors {
  explicit MoeTensors(std::int64_t num_experts);

  at::Tensor router;                       // [num_experts][hidden]
  std::vector<at::Tensor> gate, up, down;  // per expert
  at::Tensor shared_gate;                  // Qwen2-MoE: [1][hidden]; undefined otherwise
  at::Tensor shared_gate_proj, shared_up, shared_down;

  // The member a router or expert tensor goes to (nullptr for the other kinds).
  at::Tensor* slot(WeightKind kind, std::int64_t expert);
};

// The sparse MLP's output for h [rows, hidden]: each row routed as canonical mode routes
// (route_row: softmax, top-k with ties to the lowest expert index, norm_topk_prob), the
// chosen experts' outputs weighted and summed; plus, with a shared expert,
// sigmoid(shared_gate . h) * shared_expert(h).
at::Tensor moe_mlp(const MoeTensors& w, const at::Tensor& h, const MoeConfig& moe);

}  // namespace detinfer::model::fast
