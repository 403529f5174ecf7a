// The CUDA backend: every op of the forward pass as one or a few kernels::cuda:: launches
// through a CudaOps table, on device memory. Canonical mode uses the canonical kernels
// (bitwise equal to the CPU backend); device-invariant (and fast) mode uses the
// tensor-core linear, the fixed-tree RMSNorm and the fixed-split attention (with the
// sliding window and soft-cap of kernels::AttentionMask in both attention kernels).
//
// A step's index arrays are staged on the device by begin_step() (one upload each):
// tokens and positions (int32), key counts (int64), the sequences' block tables
// (int32, concatenated), and the RoPE table rows when the table grew.
#include "model/cuda_backend.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/reference/quant_blocks.h"
#include "model/rope_table.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

class CudaLinear final : public BackendLinear {
 public:
  std::int64_t n() const override { return n_; }
  std::int64_t k() const override { return k_; }
  std::size_t bytes() const override { return w.bytes() + bias.bytes() + scales.bytes(); }

  BackendBuffer w;     // [n][k]: the stored dtype (canonical), bf16 (tensor cores) or int8
  BackendBuffer bias;  // n floats, or empty
  core::DType dtype = core::DType::kF32;
  // Quantized (canonical only): w holds the decoded int8 weights and `scales` one
  // ref::BlockScales per (row, 32-block) (kernels::cuda::quant_linear's layout).
  bool quantized = false;
  bool has_min = false;
  BackendBuffer scales;
  std::int64_t n_ = 0;
  std::int64_t k_ = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<CudaOps> ops, NumericsMode mode, std::string name)
      : ops_(std::move(ops)),
        canonical_(mode == NumericsMode::kCanonical),
        mode_(mode),
        name_(std::move(name)) {}

  std::string name() const override { return name_; }
  DeviceInfo device_info() const override { return ops_->device_info(); }
  NumericsMode numerics() const override { return mode_; }

  void upload(void* dst, const void* host, std::size_t bytes) override {
    ops_->upload(dst, host, bytes);
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    ops_->download(host, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override { ops_->copy(dst, src, bytes); }

  std::unique_ptr<BackendLinear> make_linear(const void* w, core::DType dtype, std::int64_t n,
                                             std::int64_t k, const float* bias) override {
    auto l = std::make_unique<CudaLinear>();
    l->n_ = n;
    l->k_ = k;
    if (bias != nullptr) l->bias = upload_new(bias, static_cast<std::size_t>(n) * sizeof(float));
    const std::int64_t count = n * k;
    if (canonical_) {
      l->dtype = dtype;
      l->w = upload_new(w, static_cast<std::size_t>(count) * core::dtype_size(dtype));
      return l;
    }
    if (k % 8 != 0) {
      fail(ErrorCode::kUnsupported, "numerics mode ", to_string(mode_), " on ", name_,
           ": the tensor-core linear needs in_features % 8 == 0, got a [", n, " x ", k, "] weight");
    }
    // Converted once: widened on the host (exact), rounded to bf16 on the device.
    std::vector<float> wide(static_cast<std::size_t>(count));
    widen_to_f32(dtype, w, count, wide.data());
    const BackendBuffer staged = upload_new(wide.data(), wide.size() * sizeof(float));
    l->dtype = core::DType::kBF16;
    l->w = alloc(static_cast<std::size_t>(count) * 2);
    ops_->f32_to_bf16(staged.as<float>(), l->w.as<std::uint16_t>(), count);
    ops_->synchronize();  // before `staged` is freed
    return l;
  }

  // Canonical mode only: the blocks are decoded once here (ref::decode_block, exact) to
  // int8 weights and per-block scales; the device then runs quantized spec v1's
  // operations in the reference's order, so the logits are the CPU backend's bits.
  std::unique_ptr<BackendLinear> make_quantized_linear(const void* blocks,
                                                       kernels::QuantFormat format, std::int64_t n,
                                                       std::int64_t k, const float* bias) override {
    if (!canonical_) {
      throw Error(ErrorCode::kUnsupported,
                  str_cat("weights ", kernels::to_string(format), " on ", name_,
                          ": quantized kernels run in numerics mode canonical only, not ",
                          to_string(mode_)),
                  "weights");
    }
    const std::int64_t row_bytes = kernels::quant_row_bytes(format, k);
    const std::int64_t nb = k / 32;
    std::vector<std::int8_t> wq(static_cast<std::size_t>(n * k));
    std::vector<kernels::ref::BlockScales> ws(static_cast<std::size_t>(n * nb));
    for (std::int64_t j = 0; j < n; ++j) {
      const auto* row = static_cast<const std::uint8_t*>(blocks) + j * row_bytes;
      for (std::int64_t b = 0; b < nb; ++b) {
        ws[static_cast<std::size_t>(j * nb + b)] = kernels::ref::decode_block(
            format, row, b, &wq[static_cast<std::size_t>(j * k + b * 32)]);
      }
    }
    auto l = std::make_unique<CudaLinear>();
    l->n_ = n;
    l->k_ = k;
    l->quantized = true;
    l->has_min = kernels::quant_format_info(format).has_min;
    l->w = upload_new(wq.data(), wq.size());
    l->scales = upload_new(ws.data(), ws.size() * sizeof(kernels::ref::BlockScales));
    if (bias != nullptr) l->bias = upload_new(bias, static_cast<std::size_t>(n) * sizeof(float));
    return l;
  }
  bool has_quantized_kernels() const override { return canonical_; }

  void begin_step(const BatchPlan& plan, const RopeTable& rope) override {
    plan_ = &plan;
    const auto rows = static_cast<std::size_t>(plan.rows);
    std::vector<std::int32_t> positions(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      positions[r] = static_cast<std::int32_t>(plan.positions[r]);
    }
    std::vector<std::int32_t> tables;
    table_offsets_.clear();
    for (const BatchPlan::Seq& s : plan.seqs) {
      table_offsets_.push_back(static_cast<std::int64_t>(tables.size()));
      tables.insert(tables.end(), s.block_table, s.block_table + s.num_blocks);
    }
    stage(tokens_, plan.tokens.data(), rows * sizeof(std::int32_t));
    stage(positions_, positions.data(), rows * sizeof(std::int32_t));
    stage(num_keys_, plan.num_keys.data(), rows * sizeof(std::int64_t));
    stage(tables_, tables.data(), tables.size() * sizeof(std::int32_t));
    stage_rope(rope);
    active_rope_ = 0;
  }

  void embedding(const void* table, core::DType dtype, std::int64_t vocab, std::int64_t dim,
                 float* x) override {
    ops_->embedding(tokens_.as<std::int32_t>(), plan_->rows, table, dtype, vocab, dim, x, dim);
  }
  // Canonical linears keep the [n][k] table as stored; tensor-core ones a bf16 copy.
  bool linear_serves_rows() const override { return canonical_; }
  void embedding_from_linear(const BackendLinear& w, float* x) override {
    const auto& l = static_cast<const CudaLinear&>(w);
    if (l.quantized) {
      ops_->quant_embedding(tokens_.as<std::int32_t>(), plan_->rows, l.w.as<std::int8_t>(),
                            l.scales.as<kernels::ref::BlockScales>(), l.has_min, l.n(), l.k(), x,
                            l.k());
      return;
    }
    embedding(l.w.data(), l.dtype, l.n(), l.k(), x);
  }

  void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                std::int64_t ldy, std::int64_t rows, std::int64_t n) override {
    if (canonical_) {
      ops_->rms_norm(x, ldx, w, eps, y, ldy, rows, n);
    } else {
      ops_->rms_norm_fast(x, ldx, w, eps, y, ldy, rows, n);
    }
  }

  void linear(const BackendLinear& wl, const float* x, std::int64_t ldx, std::int64_t m, float* y,
              std::int64_t ldy) override {
    const auto& l = static_cast<const CudaLinear&>(wl);
    const float* bias = l.bias.bytes() > 0 ? l.bias.as<float>() : nullptr;
    if (l.quantized) {
      quant_linear(l, x, ldx, m, bias, y, ldy);
      return;
    }
    if (canonical_) {
      ops_->linear(x, ldx, m, l.w.data(), l.dtype, l.n_, l.k_, bias, y, ldy);
      return;
    }
    const std::int64_t count = (m - 1) * ldx + l.k_;
    reserve(x_bf16_, static_cast<std::size_t>(m * ldx) * 2);
    ops_->f32_to_bf16(x, x_bf16_.as<std::uint16_t>(), count);
    ops_->linear_bf16_tc(x_bf16_.as<std::uint16_t>(), ldx, m, l.w.as<std::uint16_t>(), l.n_, l.k_,
                         bias, y, ldy);
  }

  void rope(float* x, std::int64_t ldx, std::int64_t heads, std::int64_t head_dim,
            std::int64_t rotary_dims) override {
    const DeviceRope& d = ropes_[active_rope_];
    ops_->rope(x, plan_->rows, ldx, heads, head_dim, rotary_dims, d.cos.as<float>(),
               d.sin.as<float>(), d.half, positions_.as<std::int32_t>());
  }

  void kv_write(const float* k, const float* v, std::int64_t ld, const KvLayer& kv) override {
    for (std::size_t i = 0; i < plan_->seqs.size(); ++i) {
      const BatchPlan::Seq& s = plan_->seqs[i];
      ops_->kv_write(k + s.row_begin * ld, v + s.row_begin * ld, ld, s.rows, s.start_pos,
                     tables_.as<std::int32_t>() + table_offsets_[i], kv.block_size,
                     kv.num_kv_heads * kv.head_dim, kv.k_pool, kv.v_pool, kv.kv_dtype);
    }
  }

  void attention(const float* q, std::int64_t ldq, std::int64_t num_heads, const KvLayer& kv,
                 float scale, float* out, std::int64_t ldo) override {
    for (std::size_t i = 0; i < plan_->seqs.size(); ++i) {
      const BatchPlan::Seq& s = plan_->seqs[i];
      const kernels::PagedKvView view =
          paged_view(kv, tables_.as<std::int32_t>() + table_offsets_[i], s.num_blocks);
      const float* qs = q + s.row_begin * ldq;
      float* os = out + s.row_begin * ldo;
      const std::int64_t* keys = num_keys_.as<std::int64_t>() + s.row_begin;
      if (canonical_) {
        ops_->attention_masked(qs, ldq, s.rows, keys, num_heads, view, scale, kv.window, kv.softcap,
                               os, ldo);
        continue;
      }
      // Causal rows of one sequence: the last row sees the most keys.
      const std::int64_t max_keys =
          plan_->num_keys[static_cast<std::size_t>(s.row_begin + s.rows - 1)];
      const std::size_t ws =
          ops_->attention_split_workspace_bytes(s.rows, num_heads, kv.head_dim, max_keys);
      reserve(workspace_, ws);
      // The split kernel clips its fixed splits to the window and soft-caps like the
      // canonical kernel (kernels::AttentionMask's rule).
      ops_->attention_split(qs, ldq, s.rows, keys, max_keys, num_heads, view, scale, kv.window,
                            kv.softcap, os, ldo, workspace_.data(), ws);
    }
  }

  void silu_mul(const float* g, const float* u, float* out, std::int64_t n) override {
    ops_->silu_mul(g, u, out, n);
  }
  void add(const float* a, const float* b, float* out, std::int64_t n) override {
    ops_->add(a, b, out, n);
  }

  // --- Gemma 2 / 3 (issue 29), every mode: scale, gelu and softcap are elementwise
  // kernels (no reduction), the GeGLU's linears are linear() (tensor cores outside
  // canonical mode), and attention() takes the window and the soft-cap in both kernels.
  bool has_gemma_ops() const override { return true; }
  void scale(float* x, float s, std::int64_t n) override { ops_->scale(x, s, n); }
  void mlp_gate_up_gelu(const BackendLinear& wgate, const BackendLinear& wup, const float* x,
                        std::int64_t m, float* g, float* u, float* a) override {
    linear(wgate, x, wgate.k(), m, g, wgate.n());
    linear(wup, x, wup.k(), m, u, wup.n());
    ops_->gelu_tanh_mul(g, u, a, m * wgate.n());
  }
  void softcap(float* x, float cap, std::int64_t n) override { ops_->softcap(x, cap, n); }
  void set_rope(const RopeTable& rope) override {
    const int slot = &rope == ropes_[0].src ? 0 : 1;
    stage_rope(rope, slot);
    active_rope_ = slot;
  }

  void gather_logit_rows(const float* x, std::int64_t ld, std::int64_t n, float* out) override {
    for (std::size_t i = 0; i < plan_->logit_rows.size(); ++i) {
      ops_->copy(out + static_cast<std::int64_t>(i) * n, x + plan_->logit_rows[i] * ld,
                 static_cast<std::size_t>(n) * sizeof(float));
    }
  }

  void copy_out(const float* src, std::int64_t n, float* host) override {
    ops_->download(host, src, static_cast<std::size_t>(n) * sizeof(float));
  }

 protected:
  void* allocate_zeroed(std::size_t bytes, Touch) override { return ops_->malloc_zeroed(bytes); }
  void free(void* ptr) noexcept override { ops_->free(ptr); }

 private:
  // Activations quantized per 32-block into the step's scratch, then the linear.
  void quant_linear(const CudaLinear& l, const float* x, std::int64_t ldx, std::int64_t m,
                    const float* bias, float* y, std::int64_t ldy) {
    const std::int64_t k = l.k_, nb = k / 32;
    reserve(xq_, static_cast<std::size_t>(m * k));
    reserve(xd_, static_cast<std::size_t>(m * nb) * sizeof(float));
    reserve(xs_, static_cast<std::size_t>(m * 2 * nb) * sizeof(std::int32_t));
    ops_->quantize_acts(x, ldx, m, k, xq_.as<std::int8_t>(), xd_.as<float>(),
                        xs_.as<std::int32_t>());
    ops_->quant_linear(xq_.as<std::int8_t>(), xd_.as<float>(), xs_.as<std::int32_t>(), m,
                       l.w.as<std::int8_t>(), l.scales.as<kernels::ref::BlockScales>(), l.has_min,
                       l.n_, k, bias, y, ldy);
  }

  // Grows `b` to at least `bytes` (contents are not kept).
  void reserve(BackendBuffer& b, std::size_t bytes) {
    if (b.bytes() < bytes) b = alloc(bytes);
  }
  // Uploads the RoPE rows the device does not have yet; capacity grows by doubling, so
  // decode (one new position per step) uploads one row per step, not the whole table.
  // Slot 0 holds the step's table, slot 1 a second one (Gemma 3's local table, set_rope).
  void stage_rope(const RopeTable& rope, int slot = 0) {
    DeviceRope& d = ropes_[slot];
    d.src = &rope;
    const std::int64_t rows = rope.size();
    if (rows <= d.rows) return;
    d.half = rope.half();
    const auto row_bytes = static_cast<std::size_t>(d.half) * sizeof(float);
    std::int64_t from = d.rows;
    if (static_cast<std::size_t>(rows) * row_bytes > d.cos.bytes()) {
      const std::int64_t cap = std::max<std::int64_t>(rows, 2 * d.rows);
      d.cos = alloc(static_cast<std::size_t>(cap) * row_bytes);
      d.sin = alloc(static_cast<std::size_t>(cap) * row_bytes);
      from = 0;
    }
    const std::size_t offset = static_cast<std::size_t>(from) * row_bytes;
    const std::size_t bytes = static_cast<std::size_t>(rows - from) * row_bytes;
    ops_->upload(d.cos.as<std::uint8_t>() + offset, rope.cos(from), bytes);
    ops_->upload(d.sin.as<std::uint8_t>() + offset, rope.sin(from), bytes);
    d.rows = rows;
  }

  void stage(BackendBuffer& b, const void* host, std::size_t bytes) {
    reserve(b, bytes);
    if (bytes > 0) ops_->upload(b.data(), host, bytes);
  }

  std::shared_ptr<CudaOps> ops_;  // first: the buffers below are freed through it
  bool canonical_;
  NumericsMode mode_;
  std::string name_;
  const BatchPlan* plan_ = nullptr;
  BackendBuffer tokens_, positions_, num_keys_, tables_;
  std::vector<std::int64_t> table_offsets_;
  struct DeviceRope {
    BackendBuffer cos, sin;
    std::int64_t rows = 0, half = 0;
    const RopeTable* src = nullptr;
  };
  DeviceRope ropes_[2];
  int active_rope_ = 0;
  BackendBuffer x_bf16_, workspace_;
  BackendBuffer xq_, xd_, xs_;  // quantized activations (quant_linear)
};

}  // namespace

std::shared_ptr<Backend> make_cuda_backend_over(std::shared_ptr<CudaOps> ops, NumericsMode mode,
                                                std::string name) {
  return std::make_shared<CudaBackend>(std::move(ops), mode, std::move(name));
}

}  // namespace detinfer::model
