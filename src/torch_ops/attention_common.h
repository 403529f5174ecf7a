// What the CPU (attention_ops.cpp) and CUDA (cuda_ops.cpp) attention operators share: the
// validation of the indices a sequence reads, and the bodies of `attention` and
// `paged_attention_decode` over a device policy. The kernels trust their inputs; the
// operators never do, and both devices check the same things in the same order.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace detinfer::torch_ops {

// One sequence's key counts (a row sees keys [0, keys[r])) and block table, checked
// against a cache of `num_blocks` blocks of `block_size` tokens: every row sees at least
// one key, the table covers the most keys, and every entry used is a block of the cache.
// Returns the entries used, as the kernels take them.
inline std::vector<std::int32_t> checked_blocks(const std::vector<std::int64_t>& keys,
                                                const std::vector<std::int64_t>& table,
                                                std::int64_t block_size, std::int64_t num_blocks,
                                                const char* op) {
  std::int64_t max_keys = 0;
  for (std::size_t r = 0; r < keys.size(); ++r) {
    TORCH_CHECK(keys[r] >= 1, "detinfer::", op, ": row ", r, " sees ", keys[r],
                " keys (need >= 1)");
    max_keys = std::max(max_keys, keys[r]);
  }
  const std::int64_t used = (max_keys + block_size - 1) / block_size;
  TORCH_CHECK(used <= static_cast<std::int64_t>(table.size()), "detinfer::", op, ": ", max_keys,
              " keys need ", used, " blocks but the block table has ", table.size());
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(used));
  for (std::int64_t b = 0; b < used; ++b) {
    TORCH_CHECK(table[b] >= 0 && table[b] < num_blocks, "detinfer::", op, ": block_table[", b,
                "] = ", table[b], " is outside the cache's ", num_blocks, " blocks");
    blocks[b] = static_cast<std::int32_t>(table[b]);
  }
  return blocks;
}

// The operator bodies over a device policy `Dev`, which provides
//   Dev::Cache check_cache(k_cache, v_cache, op)   the cache's shape, checked
//   Dev::Guard (constructed from q.device())       held for the call (CUDA: device guard)
//   at::Tensor check_q(q, cache, op)               q [rows, H, D] as contiguous f32
//   std::vector<std::int64_t> ints(t, op, what)    an index tensor's values on the host
//   void run(qf, row0, rows, keys, table, k_cache, v_cache, cache, scale, out, op)
//       rows [row0, row0 + rows) of qf into the same rows of out (one sequence).
// An operator call (`op` names it in errors): its cache and q checked, with the device
// guard held for the call.
template <typename Dev>
struct CheckedCall {
  const char* const op;
  const typename Dev::Cache cache;
  const typename Dev::Guard guard;
  const at::Tensor qf;
  CheckedCall(const Dev& dev, const char* op_name, const at::Tensor& q, const at::Tensor& k_cache,
              const at::Tensor& v_cache)
      : op(op_name),
        cache(dev.check_cache(k_cache, v_cache, op)),
        guard(q.device()),
        qf(dev.check_q(q, cache, op)) {}
};

template <typename Dev>
at::Tensor attention_op(const Dev& dev, const at::Tensor& q, const at::Tensor& k_cache,
                        const at::Tensor& v_cache, const at::Tensor& block_table,
                        const at::Tensor& num_keys, double scale) {
  const CheckedCall<Dev> c(dev, "attention", q, k_cache, v_cache);
  const auto table = dev.ints(block_table, c.op, "block_table");
  const auto keys = dev.ints(num_keys, c.op, "num_keys");
  const std::int64_t rows = c.qf.size(0);
  TORCH_CHECK(static_cast<std::int64_t>(keys.size()) == rows, "detinfer::", c.op, ": num_keys has ",
              keys.size(), " entries for ", rows, " query rows");
  at::Tensor out = at::empty_like(c.qf);
  if (rows > 0) dev.run(c.qf, 0, rows, keys, table, k_cache, v_cache, c.cache, scale, out, c.op);
  return out.to(q.scalar_type());
}

template <typename Dev>
at::Tensor paged_attention_decode_op(const Dev& dev, const at::Tensor& q, const at::Tensor& k_cache,
                                     const at::Tensor& v_cache, const at::Tensor& block_tables,
                                     const at::Tensor& context_lens, double scale) {
  const CheckedCall<Dev> c(dev, "paged_attention_decode", q, k_cache, v_cache);
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.size(0) == c.qf.size(0), "detinfer::", c.op,
              ": block_tables must be [", c.qf.size(0), ", max_blocks], got ",
              block_tables.sizes());
  const std::int64_t batch = c.qf.size(0);
  const auto tables = dev.ints(block_tables, c.op, "block_tables");
  const auto lens = dev.ints(context_lens, c.op, "context_lens");
  TORCH_CHECK(static_cast<std::int64_t>(lens.size()) == batch, "detinfer::", c.op,
              ": context_lens has ", lens.size(), " entries for a batch of ", batch);
  const std::int64_t width = block_tables.size(1);
  at::Tensor out = at::empty_like(c.qf);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<std::int64_t> table(tables.begin() + b * width,
                                          tables.begin() + (b + 1) * width);
    dev.run(c.qf, b, 1, {lens[b]}, table, k_cache, v_cache, c.cache, scale, out, c.op);
  }
  return out.to(q.scalar_type());
}

}  // namespace detinfer::torch_ops
