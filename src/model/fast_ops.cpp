// The fast forward pass's ops (fast_ops.h): libtorch on the CPU.
#include "model/fast_ops.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace detinfer::model::fast {

// One row goes through at::mv (BLAS gemv: reads W once); addmm with M = 1 makes OpenBLAS
// pack the whole of W first, which doubles decode's memory traffic.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (x.size(0) != 1) return at::linear(x, w, b);
  at::Tensor y = at::mv(w, x[0]);
  if (b.defined()) y = y + b;
  return y.unsqueeze(0);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, float eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const std::int64_t half = cos.size(2), rd = 2 * half;
  const at::Tensor x1 = x.narrow(2, 0, half);
  const at::Tensor x2 = x.narrow(2, half, half);
  at::Tensor rotated = at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 2);
  if (rd == x.size(2)) return rotated;
  return at::cat({rotated, x.narrow(2, rd, x.size(2) - rd)}, 2);
}

at::Tensor gated_mlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                     const at::Tensor& down, Activation act) {
  const at::Tensor g = fast::linear(x, gate);
  const at::Tensor a = act == Activation::kGeluTanh ? at::gelu(g, "tanh") : at::silu(g);
  return fast::linear(a * fast::linear(x, up), down);
}

namespace {

// One sequence's attention: its rows' queries qs [nh, rows, hd] over the keys [lo, keys)
// of the pool (kall / vall: [pool_tokens, nkv, hd]); [rows, nh * hd].
at::Tensor attend_seq(const ModelConfig& c, float scale, const at::Tensor& qs,
                      const at::Tensor& kall, const at::Tensor& vall, const BatchPlan::Seq& s,
                      std::int64_t block_size, std::int64_t window) {
  const std::int64_t nh = c.num_heads, nkv = c.num_kv_heads, hd = c.head_dim;
  const std::int64_t keys = s.start_pos + s.rows;
  // The oldest key any row sees: the first row's window starts at start_pos - window + 1.
  const std::int64_t lo = window > 0 ? std::max<std::int64_t>(0, s.start_pos - window + 1) : 0;
  const std::int64_t n = keys - lo;
  at::Tensor slots = at::empty({n}, at::kLong);
  for (std::int64_t t = lo; t < keys; ++t) {
    slots.data_ptr<std::int64_t>()[t - lo] =
        s.block_table[t / block_size] * block_size + t % block_size;
  }
  // [nh, n, hd] after repeating each kv head for its query group.
  const at::Tensor ks = kall.index_select(0, slots).repeat_interleave(nh / nkv, 1).transpose(0, 1);
  const at::Tensor vs = vall.index_select(0, slots).repeat_interleave(nh / nkv, 1).transpose(0, 1);
  at::Tensor scores = at::matmul(qs, ks.transpose(1, 2)) * scale;
  if (c.attn_logit_softcapping > 0.0) {  // Gemma 2: tanh(s / cap) * cap, before the mask
    const double cap = c.attn_logit_softcapping;
    scores = at::tanh(scores / cap) * cap;
  }
  // Row r (position p = start_pos + r) sees keys j <= p, and j > p - window when windowed.
  const at::Tensor key_pos = at::arange(lo, keys, at::kLong).view({1, n});
  const at::Tensor row_pos = at::arange(s.start_pos, keys, at::kLong).view({s.rows, 1});
  at::Tensor hidden = key_pos.gt(row_pos);
  if (window > 0) hidden = hidden.logical_or(key_pos.le(row_pos - window));
  scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
  const at::Tensor p = at::softmax(scores, -1);
  return at::matmul(p, vs).transpose(0, 1).reshape({s.rows, nh * hd});
}

}  // namespace

at::Tensor attend(const ModelConfig& c, float scale, const at::Tensor& q, const at::Tensor& k,
                  const at::Tensor& v, const BatchPlan& plan, KvCachePool& kv, std::int64_t li) {
  const std::int64_t m = plan.rows, hd = c.head_dim, nkv = c.num_kv_heads;
  const std::int64_t kd = nkv * hd;
  const std::int64_t pool_tokens = kv.capacity() * kv.block_size();
  // f32 only: Model::load rejects another kv_dtype in fast mode, forward() a pool of one.
  auto* kp = static_cast<float*>(kv.k_pool(li));
  auto* vp = static_cast<float*>(kv.v_pool(li));
  for (std::int64_t r = 0; r < m; ++r) {
    const std::int64_t slot = plan.kv_slots[static_cast<std::size_t>(r)];
    std::memcpy(kp + slot * kd, k.data_ptr<float>() + r * kd, static_cast<std::size_t>(kd) * 4);
    std::memcpy(vp + slot * kd, v.data_ptr<float>() + r * kd, static_cast<std::size_t>(kd) * 4);
  }
  const at::Tensor kall = at::from_blob(kp, {pool_tokens, nkv, hd}, at::kFloat);
  const at::Tensor vall = at::from_blob(vp, {pool_tokens, nkv, hd}, at::kFloat);
  const std::int64_t window = layer_is_sliding(c, li) ? c.sliding_window : 0;
  std::vector<at::Tensor> outs;
  for (const BatchPlan::Seq& s : plan.seqs) {
    const at::Tensor qs = q.narrow(0, s.row_begin, s.rows).transpose(0, 1);  // [nh, rows, hd]
    outs.push_back(attend_seq(c, scale, qs, kall, vall, s, kv.block_size(), window));
  }
  return at::cat(outs, 0);
}

}  // namespace detinfer::model::fast
