// Paged attention (decode and prefill) on kernels::attention. A row's output depends
// only on its query and its visible keys, never on the other rows or sequences.
#include <ATen/ATen.h>

#include <vector>

#include "kernels/kernels.h"
#include "torch_ops/ops.h"
#include "torch_ops/torch_glue.h"

namespace detinfer::torch_ops {
namespace {

struct CacheShape {
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
};

CacheShape check_cache(const at::Tensor& k, const at::Tensor& v, const char* op) {
  for (const auto* t : {&k, &v}) {
    const char* what = t == &k ? "k_cache" : "v_cache";
    TORCH_CHECK(t->defined() && t->device().is_cpu() && t->scalar_type() == at::kFloat,
                "detinfer::", op, ": ", what, " must be a float32 CPU tensor");
    TORCH_CHECK(t->dim() == 4, "detinfer::", op, ": ", what,
                " must be [num_blocks, block_size, num_kv_heads, head_dim], got ", t->sizes());
    TORCH_CHECK(t->is_contiguous(), "detinfer::", op, ": ", what, " must be contiguous");
  }
  TORCH_CHECK(k.sizes() == v.sizes(), "detinfer::", op, ": k_cache ", k.sizes(), " and v_cache ",
              v.sizes(), " differ");
  CacheShape s{k.size(0), k.size(1), k.size(2), k.size(3)};
  TORCH_CHECK(s.block_size > 0 && s.num_kv_heads > 0 && s.head_dim > 0, "detinfer::", op,
              ": empty cache dimensions ", k.sizes());
  return s;
}

// q [rows, H, D] -> f32 contiguous, checking D and the GQA grouping.
at::Tensor check_q(const at::Tensor& q, const CacheShape& s, const char* op) {
  check_cpu_float(q, op, "q");
  TORCH_CHECK(q.dim() == 3, "detinfer::", op, ": q must be [rows, num_heads, head_dim], got ",
              q.sizes());
  TORCH_CHECK(q.size(2) == s.head_dim, "detinfer::", op, ": q head_dim ", q.size(2),
              " != cache head_dim ", s.head_dim);
  TORCH_CHECK(q.size(1) > 0 && q.size(1) % s.num_kv_heads == 0, "detinfer::", op, ": num_heads ",
              q.size(1), " is not a multiple of num_kv_heads ", s.num_kv_heads);
  return to_f32_contiguous(q);
}

std::vector<std::int64_t> to_i64_vector(const at::Tensor& t, const char* op, const char* what) {
  TORCH_CHECK(t.defined() && t.device().is_cpu() && !at::isFloatingType(t.scalar_type()) &&
                  t.scalar_type() != at::kBool,
              "detinfer::", op, ": ", what, " must be an integer CPU tensor");
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<std::int64_t>(c.data_ptr<std::int64_t>(),
                                   c.data_ptr<std::int64_t>() + c.numel());
}

// Runs kernels::attention for one sequence after validating every index it will read:
// the kernel trusts its inputs, the operator never does.
void run_sequence(const float* q, std::int64_t rows, std::int64_t num_heads,
                  const std::vector<std::int64_t>& num_keys, const std::vector<std::int64_t>& table,
                  const at::Tensor& k_cache, const at::Tensor& v_cache, const CacheShape& s,
                  double scale, float* out, const char* op) {
  std::int64_t max_keys = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    TORCH_CHECK(num_keys[r] >= 1, "detinfer::", op, ": row ", r, " sees ", num_keys[r],
                " keys (need >= 1)");
    max_keys = std::max(max_keys, num_keys[r]);
  }
  const std::int64_t used_blocks = (max_keys + s.block_size - 1) / s.block_size;
  TORCH_CHECK(used_blocks <= static_cast<std::int64_t>(table.size()), "detinfer::", op, ": ",
              max_keys, " keys need ", used_blocks, " blocks but the block table has ",
              table.size());
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(used_blocks));
  for (std::int64_t b = 0; b < used_blocks; ++b) {
    TORCH_CHECK(table[b] >= 0 && table[b] < s.num_blocks, "detinfer::", op, ": block_table[", b,
                "] = ", table[b], " is outside the cache's ", s.num_blocks, " blocks");
    blocks[b] = static_cast<std::int32_t>(table[b]);
  }
  kernels::PagedKvView kv;
  kv.k_pool = k_cache.data_ptr<float>();
  kv.v_pool = v_cache.data_ptr<float>();
  kv.block_table = blocks.data();
  kv.num_blocks = used_blocks;
  kv.block_size = s.block_size;
  kv.num_kv_heads = s.num_kv_heads;
  kv.head_dim = s.head_dim;
  const std::int64_t ld = num_heads * s.head_dim;
  guarded(op, [&] {
    kernels::attention(q, ld, rows, num_keys.data(), num_heads, kv, static_cast<float>(scale), out,
                       ld, kernel_pool());
    return 0;
  });
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_table, const at::Tensor& num_keys, double scale) {
  const CacheShape s = check_cache(k_cache, v_cache, "attention");
  const at::Tensor qf = check_q(q, s, "attention");
  const auto table = to_i64_vector(block_table, "attention", "block_table");
  const auto keys = to_i64_vector(num_keys, "attention", "num_keys");
  const std::int64_t rows = qf.size(0);
  TORCH_CHECK(static_cast<std::int64_t>(keys.size()) == rows, "detinfer::attention: num_keys has ",
              keys.size(), " entries for ", rows, " query rows");
  at::Tensor out = at::empty_like(qf);
  if (rows > 0) {
    run_sequence(qf.data_ptr<float>(), rows, qf.size(1), keys, table, k_cache, v_cache, s, scale,
                 out.data_ptr<float>(), "attention");
  }
  return out.to(q.scalar_type());
}

at::Tensor paged_attention_decode(const at::Tensor& q, const at::Tensor& k_cache,
                                  const at::Tensor& v_cache, const at::Tensor& block_tables,
                                  const at::Tensor& context_lens, double scale) {
  const char* op = "paged_attention_decode";
  const CacheShape s = check_cache(k_cache, v_cache, op);
  const at::Tensor qf = check_q(q, s, op);
  const std::int64_t batch = qf.size(0);
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.size(0) == batch, "detinfer::", op,
              ": block_tables must be [", batch, ", max_blocks], got ", block_tables.sizes());
  const auto tables = to_i64_vector(block_tables, op, "block_tables");
  const auto lens = to_i64_vector(context_lens, op, "context_lens");
  TORCH_CHECK(static_cast<std::int64_t>(lens.size()) == batch, "detinfer::", op,
              ": context_lens has ", lens.size(), " entries for a batch of ", batch);
  const std::int64_t width = block_tables.size(1);
  at::Tensor out = at::empty_like(qf);
  const std::int64_t ld = qf.size(1) * s.head_dim;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<std::int64_t> table(tables.begin() + b * width,
                                          tables.begin() + (b + 1) * width);
    run_sequence(qf.data_ptr<float>() + b * ld, 1, qf.size(1), {lens[b]}, table, k_cache, v_cache,
                 s, scale, out.data_ptr<float>() + b * ld, op);
  }
  return out.to(q.scalar_type());
}

at::Tensor attention_prefill(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             double scale) {
  const char* op = "attention_prefill";
  TORCH_CHECK(k.dim() == 3 && v.dim() == 3 && k.sizes() == v.sizes(), "detinfer::", op,
              ": k and v must both be [T, num_kv_heads, head_dim], got ", k.sizes(), " and ",
              v.sizes());
  TORCH_CHECK(q.dim() == 3 && q.size(0) == k.size(0), "detinfer::", op, ": q must be [", k.size(0),
              ", num_heads, head_dim], got ", q.sizes());
  check_cpu_float(k, op, "k");
  check_cpu_float(v, op, "v");
  const std::int64_t t = k.size(0);
  if (t == 0) return at::empty_like(q);
  // The whole sequence as one block of T tokens: row i sees keys [0, i].
  const at::Tensor kc = to_f32_contiguous(k).unsqueeze(0);
  const at::Tensor vc = to_f32_contiguous(v).unsqueeze(0);
  const CacheShape s = check_cache(kc, vc, op);
  const at::Tensor qf = check_q(q, s, op);
  std::vector<std::int64_t> keys(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i) keys[i] = i + 1;
  at::Tensor out = at::empty_like(qf);
  run_sequence(qf.data_ptr<float>(), t, qf.size(1), keys, {0}, kc, vc, s, scale,
               out.data_ptr<float>(), op);
  return out.to(q.scalar_type());
}

}  // namespace detinfer::torch_ops
