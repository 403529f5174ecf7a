// The mixture-of-experts MLP of Qwen3-MoE, Mixtral and Qwen2-MoE in canonical numerics
// (docs/numerics.md, "Mixture of experts"), written over the Backend seam:
//
// 1. router logits = linear(h, router) on the backend (the canonical linear);
// 2. routing on the host, row by row (route_row): softmax (detinfer's exp), top-k by
//    probability with ties to the lowest expert index, optional renormalization;
// 3. each expert runs the existing MLP ops (mlp_gate_up, linear) on the rows routed to it,
//    gathered in row order: the canonical kernels give every row the same bits for any
//    number of rows, so a row's result does not depend on which other rows share the step;
// 4. the outputs are combined per row in ascending expert index: acc = +0, then
//    acc = acc + w_e * y_e (two roundings) for each chosen expert e;
// 5. Qwen2-MoE: then acc = acc + sigmoid(shared_gate . h) * shared_expert(h), every row.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace detinfer::model {

// One chosen expert of a row and its weight.
struct ExpertRoute {
  std::int64_t expert = 0;
  float weight = 0.0f;
};

// The canonical routing of one row: softmax over the num_experts logits, the k experts
// of largest probability (ties: the lowest index wins), weights = their probabilities,
// divided by their sum (summed in ascending expert index from +0) when `normalize`.
// `probs` is scratch of num_experts floats; `out` receives k routes in ascending expert
// index.
void route_row(const float* logits, std::int64_t num_experts, std::int64_t k, bool normalize,
               float* probs, ExpertRoute* out);

// Qwen2-MoE's shared-expert gate: sigmoid(z) = 1 / (1 + exp_f32(-z)), binary32, each step
// rounded (docs/numerics.md, "Mixture of experts").
float sigmoid_f32(float z);

// The member of a sparse MLP's weights `w` (MoeWeights here, the fast mode's tensors in
// fast_moe.cpp: the same member names) that a router or expert tensor goes to; nullptr
// for the other kinds.
template <class Weights>
auto moe_slot(Weights& w, WeightKind kind, std::int64_t expert) -> decltype(&w.router) {
  const auto e = static_cast<std::size_t>(expert);
  switch (kind) {
    case WeightKind::kRouter:
      return &w.router;
    case WeightKind::kExpertGate:
      return &w.gate.at(e);
    case WeightKind::kExpertUp:
      return &w.up.at(e);
    case WeightKind::kExpertDown:
      return &w.down.at(e);
    case WeightKind::kSharedGate:
      return &w.shared_gate;
    case WeightKind::kSharedExpertGate:
      return &w.shared_gate_proj;
    case WeightKind::kSharedExpertUp:
      return &w.shared_up;
    case WeightKind::kSharedExpertDown:
      return &w.shared_down;
    default:
      return nullptr;
  }
}

// One layer's sparse MLP, prepared for a backend.
struct MoeWeights {
  explicit MoeWeights(std::int64_t num_experts);

  std::unique_ptr<BackendLinear> router;
  std::vector<std::unique_ptr<BackendLinear>> gate, up, down;  // per expert
  // Qwen2-MoE: the shared expert and its [1][hidden] gate (null without one).
  std::unique_ptr<BackendLinear> shared_gate, shared_gate_proj, shared_up, shared_down;

  // The member a router or expert tensor goes to (nullptr for other kinds).
  std::unique_ptr<BackendLinear>* slot(WeightKind kind, std::int64_t expert);
  std::size_t bytes() const;
  // The expert bytes a row routed to k experts does not read: (E - k) / E of them.
  std::size_t unrouted_bytes(std::int64_t k) const;
};

// Runs the block; holds the step's scratch (backend and host), grown, never shrunk.
class MoeBlock {
 public:
  MoeBlock(const ModelConfig& config, Backend& backend) : c_(config), be_(backend) {}

  // out (m rows of hidden, backend memory) = the sparse MLP's output for the m rows of h
  // (row-contiguous, backend memory).
  void run(const MoeWeights& w, const float* h, std::int64_t m, float* out);
  // Grows the scratch to hold m rows.
  void reserve(std::int64_t m);
  std::size_t scratch_bytes() const;

 private:
  // Runs expert e on the rows routed to it and adds w_e * y_e into acc_.
  void run_expert(const MoeWeights& w, std::int64_t e, std::int64_t m);
  // Qwen2-MoE: adds sigmoid(shared_gate . h) * shared_expert(h) into acc_ for every row.
  void run_shared(const MoeWeights& w, const float* h, std::int64_t m);

  const ModelConfig& c_;
  Backend& be_;
  std::int64_t rows_ = 0;
  BackendBuffer logits_, in_, g_, u_, a_, y_;  // backend scratch
  std::vector<float> host_logits_, host_h_, host_in_, host_y_, acc_, probs_;
  std::vector<float> host_gate_;           // the shared expert's gate logits, one per row
  std::vector<ExpertRoute> routes_;        // [m][k]
  std::vector<std::int64_t> expert_rows_;  // the rows routed to the current expert
};

}  // namespace detinfer::model
