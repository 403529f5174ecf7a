#include "model/moe_block.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "kernels/kernels.h"

namespace detinfer::model {

void route_row(const float* logits, std::int64_t num_experts, std::int64_t k, bool normalize,
               float* probs, ExpertRoute* out) {
  kernels::softmax(logits, probs, num_experts);
  // Rank by rank: the largest remaining probability, scanning experts in ascending index
  // and replacing the candidate only on a strictly larger value (ties: lowest index).
  std::vector<std::uint8_t> taken(static_cast<std::size_t>(num_experts), 0);
  for (std::int64_t r = 0; r < k; ++r) {
    std::int64_t best = -1;
    for (std::int64_t e = 0; e < num_experts; ++e) {
      if (taken[static_cast<std::size_t>(e)] != 0) continue;
      if (best < 0 || probs[e] > probs[best]) best = e;
    }
    DETINFER_INTERNAL_CHECK(best >= 0);  // k <= num_experts (parse_moe_config)
    taken[static_cast<std::size_t>(best)] = 1;
  }
  // The chosen experts in ascending index, and the sum of their probabilities in that order.
  std::int64_t n = 0;
  float sum = 0.0f;
  for (std::int64_t e = 0; e < num_experts; ++e) {
    if (taken[static_cast<std::size_t>(e)] == 0) continue;
    out[n++] = {e, probs[e]};
    sum = sum + probs[e];
  }
  if (!normalize) return;
  for (std::int64_t j = 0; j < k; ++j) out[j].weight = out[j].weight / sum;
}

MoeWeights::MoeWeights(std::int64_t num_experts)
    : gate(static_cast<std::size_t>(num_experts)),
      up(static_cast<std::size_t>(num_experts)),
      down(static_cast<std::size_t>(num_experts)) {}

std::unique_ptr<BackendLinear>* MoeWeights::slot(WeightKind kind, std::int64_t expert) {
  return moe_slot(*this, kind, expert);
}

std::size_t MoeWeights::unrouted_bytes(std::int64_t k) const {
  const auto e = gate.size();
  std::size_t experts = 0;
  for (const auto* v : {&gate, &up, &down}) {
    for (const auto& p : *v) experts += p ? p->bytes() : 0;
  }
  return experts / e * (e - static_cast<std::size_t>(k));
}

std::size_t MoeWeights::bytes() const {
  std::size_t b = 0;
  for (const auto* p : {&router, &shared_gate, &shared_gate_proj, &shared_up, &shared_down}) {
    b += *p ? (*p)->bytes() : 0;
  }
  for (const auto* v : {&gate, &up, &down}) {
    for (const auto& p : *v) b += p ? p->bytes() : 0;
  }
  return b;
}

float sigmoid_f32(float z) {
  const float t = kernels::exp_f32(-z);
  return 1.0f / (1.0f + t);
}

void MoeBlock::reserve(std::int64_t m) {
  if (m <= rows_) return;
  const std::int64_t h = c_.hidden_size, e = c_.moe.num_experts;
  const std::int64_t inter = std::max(c_.moe.intermediate_size, c_.moe.shared_intermediate_size);
  auto grow = [&](BackendBuffer& b, std::int64_t floats) {
    b = be_.alloc(static_cast<std::size_t>(floats) * sizeof(float));
  };
  grow(logits_, m * e);
  grow(in_, m * h);
  grow(y_, m * h);
  for (BackendBuffer* b : {&g_, &u_, &a_}) grow(*b, m * inter);
  const auto mh = static_cast<std::size_t>(m * h);
  host_logits_.resize(static_cast<std::size_t>(m * e));
  for (std::vector<float>* v : {&host_h_, &host_in_, &host_y_, &acc_}) v->resize(mh);
  probs_.resize(static_cast<std::size_t>(e));
  host_gate_.resize(static_cast<std::size_t>(m));
  routes_.resize(static_cast<std::size_t>(m * c_.moe.experts_per_tok));
  expert_rows_.reserve(static_cast<std::size_t>(m));
  rows_ = m;
}

std::size_t MoeBlock::scratch_bytes() const {
  std::size_t b = 0;
  for (const BackendBuffer* p : {&logits_, &in_, &g_, &u_, &a_, &y_}) b += p->bytes();
  for (const std::vector<float>* v : {&host_logits_, &host_h_, &host_in_, &host_y_, &acc_}) {
    b += v->size() * sizeof(float);
  }
  return b;
}

void MoeBlock::run(const MoeWeights& w, const float* h, std::int64_t m, float* out) {
  reserve(m);
  const std::int64_t hid = c_.hidden_size, ne = c_.moe.num_experts, k = c_.moe.experts_per_tok;
  be_.linear(*w.router, h, hid, m, logits_.as<float>(), ne);
  be_.download(host_logits_.data(), logits_.data(),
               static_cast<std::size_t>(m * ne) * sizeof(float));
  for (std::int64_t r = 0; r < m; ++r) {
    route_row(host_logits_.data() + r * ne, ne, k, c_.moe.norm_topk_prob, probs_.data(),
              routes_.data() + r * k);
  }
  be_.download(host_h_.data(), h, static_cast<std::size_t>(m * hid) * sizeof(float));
  std::fill(acc_.begin(), acc_.begin() + m * hid, 0.0f);
  // Experts in ascending index: each row's terms are added in ascending expert index.
  for (std::int64_t e = 0; e < ne; ++e) run_expert(w, e, m);
  if (w.shared_gate) run_shared(w, h, m);
  be_.upload(out, acc_.data(), static_cast<std::size_t>(m * hid) * sizeof(float));
}

void MoeBlock::run_expert(const MoeWeights& w, std::int64_t e, std::int64_t m) {
  const std::int64_t hid = c_.hidden_size, k = c_.moe.experts_per_tok;
  const std::int64_t inter = c_.moe.intermediate_size;
  expert_rows_.clear();
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < k; ++j) {
      const ExpertRoute& route = routes_[static_cast<std::size_t>(r * k + j)];
      if (route.expert == e) expert_rows_.push_back(r);
    }
  }
  const auto n = static_cast<std::int64_t>(expert_rows_.size());
  if (n == 0) return;
  for (std::int64_t j = 0; j < n; ++j) {
    std::copy_n(host_h_.data() + expert_rows_[static_cast<std::size_t>(j)] * hid, hid,
                host_in_.data() + j * hid);
  }
  be_.upload(in_.data(), host_in_.data(), static_cast<std::size_t>(n * hid) * sizeof(float));
  const auto ue = static_cast<std::size_t>(e);
  be_.mlp_gate_up(*w.gate[ue], *w.up[ue], in_.as<float>(), n, g_.as<float>(), u_.as<float>(),
                  a_.as<float>());
  be_.linear(*w.down[ue], a_.as<float>(), inter, n, y_.as<float>(), hid);
  be_.download(host_y_.data(), y_.data(), static_cast<std::size_t>(n * hid) * sizeof(float));
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t r = expert_rows_[static_cast<std::size_t>(j)];
    float weight = 0.0f;
    for (std::int64_t i = 0; i < k; ++i) {
      const ExpertRoute& route = routes_[static_cast<std::size_t>(r * k + i)];
      if (route.expert == e) weight = route.weight;
    }
    float* acc = acc_.data() + r * hid;
    const float* y = host_y_.data() + j * hid;
    // Two roundings (the product, then the sum): -ffp-contract=off keeps them apart.
    for (std::int64_t i = 0; i < hid; ++i) acc[i] = acc[i] + weight * y[i];
  }
}

void MoeBlock::run_shared(const MoeWeights& w, const float* h, std::int64_t m) {
  const std::int64_t hid = c_.hidden_size, inter = c_.moe.shared_intermediate_size;
  be_.linear(*w.shared_gate, h, hid, m, logits_.as<float>(), 1);
  be_.download(host_gate_.data(), logits_.data(), static_cast<std::size_t>(m) * sizeof(float));
  be_.mlp_gate_up(*w.shared_gate_proj, *w.shared_up, h, m, g_.as<float>(), u_.as<float>(),
                  a_.as<float>());
  be_.linear(*w.shared_down, a_.as<float>(), inter, m, y_.as<float>(), hid);
  be_.download(host_y_.data(), y_.data(), static_cast<std::size_t>(m * hid) * sizeof(float));
  for (std::int64_t r = 0; r < m; ++r) {
    const float s = sigmoid_f32(host_gate_[static_cast<std::size_t>(r)]);
    float* acc = acc_.data() + r * hid;
    const float* y = host_y_.data() + r * hid;
    for (std::int64_t i = 0; i < hid; ++i) acc[i] = acc[i] + s * y[i];  // after the experts
  }
}

}  // namespace detinfer::model
