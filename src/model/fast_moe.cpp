// The fast forward pass's mixture-of-experts MLP (fast_ops.h): the routing is canonical
// mode's own (route_row, on the host, over libtorch's router logits), so that the chosen
// experts follow the same rule (ties to the lowest expert index; at::topk does not promise
// a tie order); the experts run on the rows routed to them, grouped by expert.
#include <vector>

#include "model/fast_ops.h"
#include "model/moe_block.h"

namespace detinfer::model::fast {

MoeTensors::MoeTensors(std::int64_t num_experts)
    : gate(static_cast<std::size_t>(num_experts)),
      up(static_cast<std::size_t>(num_experts)),
      down(static_cast<std::size_t>(num_experts)) {}

at::Tensor* MoeTensors::slot(WeightKind kind, std::int64_t expert) {
  return moe_slot(*this, kind, expert);
}

at::Tensor moe_mlp(const MoeTensors& w, const at::Tensor& h, const MoeConfig& moe) {
  const std::int64_t m = h.size(0), ne = moe.num_experts, k = moe.experts_per_tok;
  const at::Tensor logits = fast::linear(h, w.router).contiguous();  // [m, num_experts]
  std::vector<float> probs(static_cast<std::size_t>(ne));
  std::vector<ExpertRoute> routes(static_cast<std::size_t>(k));
  // Per expert: the rows routed to it (ascending) and their weights.
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(ne));
  std::vector<std::vector<float>> weights(static_cast<std::size_t>(ne));
  for (std::int64_t r = 0; r < m; ++r) {
    route_row(logits.data_ptr<float>() + r * ne, ne, k, moe.norm_topk_prob, probs.data(),
              routes.data());
    for (const ExpertRoute& route : routes) {
      rows[static_cast<std::size_t>(route.expert)].push_back(r);
      weights[static_cast<std::size_t>(route.expert)].push_back(route.weight);
    }
  }
  at::Tensor out = at::zeros_like(h);
  for (std::size_t e = 0; e < rows.size(); ++e) {
    if (rows[e].empty()) continue;
    const at::Tensor idx = at::tensor(rows[e]);
    const at::Tensor weight = at::tensor(weights[e]).unsqueeze(1);
    // The MoE architectures' experts are SiLU-gated.
    const at::Tensor y =
        gated_mlp(h.index_select(0, idx), w.gate[e], w.up[e], w.down[e], Activation::kSilu);
    out.index_add_(0, idx, y * weight);
  }
  if (w.shared_gate.defined()) {  // Qwen2-MoE
    out = out + at::sigmoid(fast::linear(h, w.shared_gate)) *
                    gated_mlp(h, w.shared_gate_proj, w.shared_up, w.shared_down, Activation::kSilu);
  }
  return out;
}

}  // namespace detinfer::model::fast
