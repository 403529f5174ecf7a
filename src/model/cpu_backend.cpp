// The CPU backend: the ops of the forward pass over kernels:: (numerics spec v1), host
// memory, a kernel thread pool. Every op treats rows independently.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "model/backend.h"
#include "model/rope_table.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

class CpuLinear final : public BackendLinear {
 public:
  explicit CpuLinear(kernels::PackedLinear p) : packed(std::move(p)) {}
  std::int64_t n() const override { return packed.n(); }
  std::int64_t k() const override { return packed.k(); }
  std::size_t bytes() const override { return packed.packed_bytes(); }
  kernels::PackedLinear packed;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  // Below these sizes an elementwise op stays on the calling thread (a decode step's rows).
  static constexpr std::int64_t kMinRowsPerTask = 16;    // rope
  static constexpr std::int64_t kMinAddPerTask = 16384;  // add, floats

  std::string name() const override { return "cpu"; }
  DeviceInfo device_info() const override { return {}; }
  NumericsMode numerics() const override { return NumericsMode::kCanonical; }

  void upload(void* dst, const void* host, std::size_t bytes) override {
    std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    std::memcpy(host, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  std::unique_ptr<BackendLinear> make_linear(const void* w, core::DType dtype, std::int64_t n,
                                             std::int64_t k, const float* bias) override {
    return std::make_unique<CpuLinear>(kernels::PackedLinear::pack(w, dtype, n, k, bias));
  }

  std::unique_ptr<BackendLinear> make_quantized_linear(const void* blocks,
                                                       kernels::QuantFormat format, std::int64_t n,
                                                       std::int64_t k, const float* bias) override {
    return std::make_unique<CpuLinear>(
        kernels::PackedLinear::pack_quantized(blocks, format, n, k, bias, &pool_));
  }
  bool has_quantized_kernels() const override { return true; }

  void begin_step(const BatchPlan& plan, const RopeTable& rope) override {
    plan_ = &plan;
    rope_ = &rope;
  }
  void set_rope(const RopeTable& rope) override { rope_ = &rope; }

  void embedding(const void* table, core::DType dtype, std::int64_t vocab, std::int64_t dim,
                 float* x) override {
    const std::size_t row_bytes = static_cast<std::size_t>(dim) * core::dtype_size(dtype);
    const auto* base = static_cast<const std::uint8_t*>(table);
    for (std::int64_t r = 0; r < plan_->rows; ++r) {
      const std::int32_t t = plan_->tokens[static_cast<std::size_t>(r)];
      DETINFER_INTERNAL_CHECK(t >= 0 && t < vocab);
      widen_to_f32(dtype, base + static_cast<std::size_t>(t) * row_bytes, dim, x + r * dim);
    }
  }

  bool linear_serves_rows() const override { return true; }
  void embedding_from_linear(const BackendLinear& w, float* x) override {
    for (std::int64_t r = 0; r < plan_->rows; ++r) {
      packed(w).widen_row(plan_->tokens[static_cast<std::size_t>(r)], x + r * w.k());
    }
  }

  void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                std::int64_t ldy, std::int64_t rows, std::int64_t n) override {
    kernels::rms_norm(x, ldx, w, eps, y, ldy, rows, n, &pool_);
  }

  static const kernels::PackedLinear& packed(const BackendLinear& w) {
    return static_cast<const CpuLinear&>(w).packed;
  }

  void linear(const BackendLinear& w, const float* x, std::int64_t ldx, std::int64_t m, float* y,
              std::int64_t ldy) override {
    packed(w).run(x, ldx, m, y, ldy, &pool_);
  }

  // q, k and v in one parallel region (threads split their concatenated panels), and
  // gate, up and silu_mul in another: one synchronization each instead of three.
  void project_qkv(const BackendLinear& wq, const BackendLinear& wk, const BackendLinear& wv,
                   const float* x, std::int64_t m, float* q, float* k, float* v) override {
    const kernels::LinearOut outs[] = {
        {&packed(wq), q, wq.n()}, {&packed(wk), k, wk.n()}, {&packed(wv), v, wv.n()}};
    kernels::run_linears(outs, 3, x, wq.k(), m, &pool_);
  }

  void mlp_gate_up(const BackendLinear& wgate, const BackendLinear& wup, const float* x,
                   std::int64_t m, float* g, float* u, float* a) override {
    kernels::run_gate_up_silu(packed(wgate), packed(wup), x, wgate.k(), m, g, u, a, &pool_);
  }

  void rope(float* x, std::int64_t ldx, std::int64_t heads, std::int64_t head_dim,
            std::int64_t rotary_dims) override {
    // Rows are independent (each its own rotation): split over the pool in a prefill.
    pool_.parallel_for(plan_->rows, kMinRowsPerTask, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t pos = plan_->positions[static_cast<std::size_t>(r)];
        kernels::rope(x + r * ldx, heads, head_dim, rotary_dims, rope_->cos(pos), rope_->sin(pos));
      }
    });
  }

  void kv_write(const float* k, const float* v, std::int64_t ld, const KvLayer& kv) override {
    const std::int64_t stride = kv.num_kv_heads * kv.head_dim;
    const auto bytes = static_cast<std::int64_t>(core::dtype_size(kv.kv_dtype));
    for (std::int64_t r = 0; r < plan_->rows; ++r) {
      const std::int64_t at = plan_->kv_slots[static_cast<std::size_t>(r)] * stride * bytes;
      kernels::store_as_dtype(k + r * ld, static_cast<char*>(kv.k_pool) + at, stride, kv.kv_dtype);
      kernels::store_as_dtype(v + r * ld, static_cast<char*>(kv.v_pool) + at, stride, kv.kv_dtype);
    }
  }

  // Attention of a short context runs on the calling thread: waking the pool for a few
  // microseconds of work cost more than it saved (one parallel region fewer per layer at
  // decode). The kernel's result does not depend on the split, so neither do the bits.
  static constexpr std::int64_t kMinParallelKeyHeads = 4096;

  void attention(const float* q, std::int64_t ldq, std::int64_t num_heads, const KvLayer& kv,
                 float scale, float* out, std::int64_t ldo) override {
    std::int64_t key_heads = 0;
    for (const std::int64_t n : plan_->num_keys) key_heads += n * num_heads;
    core::ThreadPool* pool = key_heads >= kMinParallelKeyHeads ? &pool_ : nullptr;
    // A windowed layer: row r sees keys [max(0, num_keys - window), num_keys).
    first_keys_.assign(plan_->num_keys.size(), 0);
    if (kv.window > 0) {
      for (std::size_t r = 0; r < first_keys_.size(); ++r)
        first_keys_[r] = std::max<std::int64_t>(0, plan_->num_keys[r] - kv.window);
    }
    for (const BatchPlan::Seq& s : plan_->seqs) {
      const kernels::PagedKvView view = paged_view(kv, s.block_table, s.num_blocks);
      const kernels::AttentionMask mask{first_keys_.data() + s.row_begin, kv.softcap};
      kernels::attention(q + s.row_begin * ldq, ldq, s.rows, plan_->num_keys.data() + s.row_begin,
                         mask, num_heads, view, scale, out + s.row_begin * ldo, ldo, pool);
    }
  }

  void silu_mul(const float* g, const float* u, float* out, std::int64_t n) override {
    kernels::silu_mul(g, u, out, n);
  }

  void add(const float* a, const float* b, float* out, std::int64_t n) override {
    // Elementwise, so any split gives the same bits; a decode row's add stays on one thread.
    pool_.parallel_for(n, kMinAddPerTask, [&](std::int64_t i0, std::int64_t i1) {
      kernels::add(a + i0, b + i0, out + i0, i1 - i0);
    });
  }

  void gather_logit_rows(const float* x, std::int64_t ld, std::int64_t n, float* out) override {
    for (std::size_t i = 0; i < plan_->logit_rows.size(); ++i) {
      std::memcpy(out + static_cast<std::int64_t>(i) * n, x + plan_->logit_rows[i] * ld,
                  static_cast<std::size_t>(n) * sizeof(float));
    }
  }

  void copy_out(const float* src, std::int64_t n, float* host) override {
    std::memcpy(host, src, static_cast<std::size_t>(n) * sizeof(float));
  }
  bool computes_in_host_memory() const override { return true; }
  void host_parallel_for(std::int64_t n,
                         const std::function<void(std::int64_t, std::int64_t)>& fn) override {
    pool_.parallel_for(n, 1, fn);
  }

  // --- Gemma 2 / Gemma 3 ---
  bool has_gemma_ops() const override { return true; }
  void scale(float* x, float s, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] * s;
  }
  void mlp_gate_up_gelu(const BackendLinear& wgate, const BackendLinear& wup, const float* x,
                        std::int64_t m, float* g, float* u, float* a) override {
    const kernels::LinearOut outs[] = {{&packed(wgate), g, wgate.n()}, {&packed(wup), u, wup.n()}};
    kernels::run_linears(outs, 2, x, wgate.k(), m, &pool_);
    kernels::gelu_tanh_mul(g, u, a, m * wgate.n());
  }
  void softcap(float* x, float cap, std::int64_t n) override { kernels::softcap(x, cap, n); }

 protected:
  void* allocate_zeroed(std::size_t bytes, Touch touch) override {
    void* p = std::calloc(bytes, 1);
    if (p == nullptr) {
      fail(ErrorCode::kResourceExhausted, "cpu backend: cannot allocate ", bytes, " bytes");
    }
    // A large calloc is fresh zero pages, not yet touched.
    if (touch == Touch::kDense) core::advise_huge_pages(p, bytes);
    return p;
  }
  void free(void* ptr) noexcept override { std::free(ptr); }

 private:
  core::ThreadPool pool_;
  const BatchPlan* plan_ = nullptr;
  const RopeTable* rope_ = nullptr;
  std::vector<std::int64_t> first_keys_;  // attention(): the rows' first visible keys
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_shared<CpuBackend>(threads);
}

}  // namespace detinfer::model
