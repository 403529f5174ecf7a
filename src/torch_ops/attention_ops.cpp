// Paged attention (decode and prefill) on kernels::attention. A row's output depends
// only on its query and its visible keys, never on the other rows or sequences.
#include <ATen/ATen.h>

#include <vector>

#include "kernels/kernels.h"
#include "torch_ops/attention_common.h"
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

// The CPU policy of the shared operator bodies (attention_common.h).
struct CpuAttention {
  using Cache = CacheShape;
  struct Guard {
    explicit Guard(const c10::Device&) {}
  };

  static CacheShape check_cache(const at::Tensor& k, const at::Tensor& v, const char* op) {
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
  static at::Tensor check_q(const at::Tensor& q, const CacheShape& s, const char* op) {
    check_cpu_float(q, op, "q");
    TORCH_CHECK(q.dim() == 3, "detinfer::", op, ": q must be [rows, num_heads, head_dim], got ",
                q.sizes());
    TORCH_CHECK(q.size(2) == s.head_dim, "detinfer::", op, ": q head_dim ", q.size(2),
                " != cache head_dim ", s.head_dim);
    TORCH_CHECK(q.size(1) > 0 && q.size(1) % s.num_kv_heads == 0, "detinfer::", op, ": num_heads ",
                q.size(1), " is not a multiple of num_kv_heads ", s.num_kv_heads);
    return to_f32_contiguous(q);
  }

  static std::vector<std::int64_t> ints(const at::Tensor& t, const char* op, const char* what) {
    TORCH_CHECK(t.defined() && t.device().is_cpu() && !at::isFloatingType(t.scalar_type()) &&
                    t.scalar_type() != at::kBool,
                "detinfer::", op, ": ", what, " must be an integer CPU tensor");
    const at::Tensor c = t.to(at::kLong).contiguous();
    return std::vector<std::int64_t>(c.data_ptr<std::int64_t>(),
                                     c.data_ptr<std::int64_t>() + c.numel());
  }

  // Rows [row0, row0 + rows) of qf [R, H, D] (f32) into the same rows of out, one
  // sequence: runs kernels::attention after validating every index it will read.
  static void run(const at::Tensor& qf, std::int64_t row0, std::int64_t rows,
                  const std::vector<std::int64_t>& num_keys, const std::vector<std::int64_t>& table,
                  const at::Tensor& k_cache, const at::Tensor& v_cache, const CacheShape& s,
                  double scale, at::Tensor& out, const char* op) {
    const std::int64_t num_heads = qf.size(1);
    const std::vector<std::int32_t> blocks =
        checked_blocks(num_keys, table, s.block_size, s.num_blocks, op);
    kernels::PagedKvView kv;
    kv.k_pool = k_cache.data_ptr<float>();
    kv.v_pool = v_cache.data_ptr<float>();
    kv.block_table = blocks.data();
    kv.num_blocks = static_cast<std::int64_t>(blocks.size());
    kv.block_size = s.block_size;
    kv.num_kv_heads = s.num_kv_heads;
    kv.head_dim = s.head_dim;
    const std::int64_t ld = num_heads * s.head_dim;
    guarded(op, [&] {
      kernels::attention(qf.data_ptr<float>() + row0 * ld, ld, rows, num_keys.data(), num_heads, kv,
                         static_cast<float>(scale), out.data_ptr<float>() + row0 * ld, ld,
                         kernel_pool());
      return 0;
    });
  }
};

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_table, const at::Tensor& num_keys, double scale) {
  return attention_op(CpuAttention{}, q, k_cache, v_cache, block_table, num_keys, scale);
}

at::Tensor paged_attention_decode(const at::Tensor& q, const at::Tensor& k_cache,
                                  const at::Tensor& v_cache, const at::Tensor& block_tables,
                                  const at::Tensor& context_lens, double scale) {
  return paged_attention_decode_op(CpuAttention{}, q, k_cache, v_cache, block_tables, context_lens,
                                   scale);
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
  const CacheShape s = CpuAttention::check_cache(kc, vc, op);
  const at::Tensor qf = CpuAttention::check_q(q, s, op);
  std::vector<std::int64_t> keys(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i) keys[i] = i + 1;
  at::Tensor out = at::empty_like(qf);
  CpuAttention::run(qf, 0, t, keys, {0}, kc, vc, s, scale, out, op);
  return out.to(q.scalar_type());
}

}  // namespace detinfer::torch_ops
