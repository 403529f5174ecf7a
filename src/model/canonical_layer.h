// A decoder layer's weights in the canonical model (canonical_model.cpp) and where each
// weight kind of the loader (weight_loader.h) is kept.
#pragma once

#include <memory>
#include <vector>

#include "core/check.h"
#include "model/backend.h"
#include "model/moe_block.h"
#include "model/weight_loader.h"

namespace detinfer::model {

struct CanonicalLayer {
  // post_norm: post_attention_layernorm; post_ff_norm: post_feedforward_layernorm (OLMo 2,
  // Gemma); pre_ff_norm: pre_feedforward_layernorm (Gemma).
  BackendBuffer input_norm, post_norm, post_ff_norm, q_norm, k_norm, pre_ff_norm;
  std::unique_ptr<BackendLinear> q, k, v, o, gate, up, down;
  std::unique_ptr<MoeWeights> moe;  // the sparse MLP (MoE layers), instead of gate/up/down
};

// Host copies of the biases until their weight arrives (a bias sorts before its weight).
struct CanonicalLayerBiases {
  std::vector<float> q, k, v;
};

inline std::vector<float> to_f32(const WeightSpec& spec, core::DType dtype, const void* data) {
  std::int64_t n = 1;
  for (const std::int64_t d : spec.shape) n *= d;
  std::vector<float> out(static_cast<std::size_t>(n));
  widen_to_f32(dtype, data, n, out.data());
  return out;
}

// The layer member of an o/gate/up/down projection.
inline std::unique_ptr<BackendLinear>* linear_slot(WeightKind kind, CanonicalLayer& l) {
  switch (kind) {
    case WeightKind::kO:
      return &l.o;
    case WeightKind::kGate:
      return &l.gate;
    case WeightKind::kUp:
      return &l.up;
    default:
      break;
  }
  DETINFER_INTERNAL_CHECK(kind == WeightKind::kDown);
  return &l.down;
}

// Where a norm weight goes (`l`: its layer; null for the final norm, `final_norm`).
inline BackendBuffer* norm_slot(WeightKind kind, CanonicalLayer* l, BackendBuffer& final_norm) {
  switch (kind) {
    case WeightKind::kInputNorm:
      return &l->input_norm;
    case WeightKind::kPostNorm:
      return &l->post_norm;
    case WeightKind::kPostFfNorm:
      return &l->post_ff_norm;
    case WeightKind::kPreFfNorm:
      return &l->pre_ff_norm;
    case WeightKind::kQNorm:
      return &l->q_norm;
    case WeightKind::kKNorm:
      return &l->k_norm;
    default:
      return &final_norm;
  }
}

}  // namespace detinfer::model
