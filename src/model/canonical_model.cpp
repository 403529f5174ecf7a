// The canonical forward pass: every step is a kernels:: call (numerics spec v1), and
// every kernel treats rows independently, so a row's result does not depend on which
// other rows (chunks, sequences) share the step or on the thread count.
#include <cstring>

#include "core/check.h"
#include "core/thread_pool.h"
#include "model/model_factories.h"
#include "model/transformer_base.h"

namespace detinfer {
namespace {

struct Layer {
  std::vector<float> input_norm, post_norm, q_norm, k_norm;
  std::vector<float> q_bias, k_bias, v_bias;
  kernels::PackedLinear q, k, v, o, gate, up, down;
};

std::vector<float> to_f32(const WeightSpec& spec, TensorDType dtype, const void* data) {
  std::int64_t n = 1;
  for (const std::int64_t d : spec.shape) n *= d;
  std::vector<float> out(static_cast<std::size_t>(n));
  widen_to_f32(dtype, data, n, out.data());
  return out;
}

class CanonicalModel final : public TransformerBase, private WeightSink {
 public:
  CanonicalModel(const ModelConfig& config, const TensorStore& store, const ModelOptions& options)
      : TransformerBase(config, options),
        pool_(options.threads),
        layers_(static_cast<std::size_t>(config.num_layers)) {
    const LoadedWeights w = stream_weights(config_, store, *this);
    std::int64_t resident =
        static_cast<std::int64_t>(embed_.size() + final_norm_.size() * 4 + lm_head_.packed_bytes());
    for (const Layer& l : layers_) {
      for (const auto* v :
           {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm, &l.q_bias, &l.k_bias, &l.v_bias}) {
        resident += static_cast<std::int64_t>(v->size() * 4);
      }
      for (const auto* p : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
        resident += static_cast<std::int64_t>(p->packed_bytes());
      }
    }
    // The bf16 embedding copy only serves row lookups (lm_head is packed separately).
    set_loaded(w, resident, static_cast<std::int64_t>(embed_.size()));
  }

 private:
  void take(const WeightSpec& s, TensorDType dtype, const void* data) override {
    const kernels::DType kd = to_kernel_dtype(dtype);
    auto pack = [&](const std::vector<float>* bias) {
      if (bias != nullptr) DETINFER_INTERNAL_CHECK(!bias->empty());  // bias sorts before weight
      return kernels::PackedLinear::pack(data, kd, s.shape[0], s.shape[1],
                                         bias != nullptr ? bias->data() : nullptr);
    };
    Layer* l = s.layer >= 0 ? &layers_[static_cast<std::size_t>(s.layer)] : nullptr;
    const bool bias = config_.attention_bias;
    switch (s.kind) {
      case WeightKind::kEmbed: {
        embed_dtype_ = dtype;
        const std::size_t bytes =
            static_cast<std::size_t>(s.shape[0] * s.shape[1]) * element_size(dtype);
        embed_.assign(static_cast<const std::uint8_t*>(data),
                      static_cast<const std::uint8_t*>(data) + bytes);
        if (config_.tie_word_embeddings) lm_head_ = pack(nullptr);
        break;
      }
      case WeightKind::kLmHead:
        lm_head_ = pack(nullptr);
        break;
      case WeightKind::kFinalNorm:
        final_norm_ = to_f32(s, dtype, data);
        break;
      case WeightKind::kInputNorm:
        l->input_norm = to_f32(s, dtype, data);
        break;
      case WeightKind::kPostNorm:
        l->post_norm = to_f32(s, dtype, data);
        break;
      case WeightKind::kQNorm:
        l->q_norm = to_f32(s, dtype, data);
        break;
      case WeightKind::kKNorm:
        l->k_norm = to_f32(s, dtype, data);
        break;
      case WeightKind::kQBias:
        l->q_bias = to_f32(s, dtype, data);
        break;
      case WeightKind::kKBias:
        l->k_bias = to_f32(s, dtype, data);
        break;
      case WeightKind::kVBias:
        l->v_bias = to_f32(s, dtype, data);
        break;
      case WeightKind::kQ:
        l->q = pack(bias ? &l->q_bias : nullptr);
        break;
      case WeightKind::kK:
        l->k = pack(bias ? &l->k_bias : nullptr);
        break;
      case WeightKind::kV:
        l->v = pack(bias ? &l->v_bias : nullptr);
        break;
      case WeightKind::kO:
        l->o = pack(nullptr);
        break;
      case WeightKind::kGate:
        l->gate = pack(nullptr);
        break;
      case WeightKind::kUp:
        l->up = pack(nullptr);
        break;
      case WeightKind::kDown:
        l->down = pack(nullptr);
        break;
    }
  }

  void run(const BatchPlan& plan, KvCachePool& kv, std::vector<float>& logits) override {
    const ModelConfig& c = config_;
    const std::int64_t m = plan.rows, h = c.hidden_size, hd = c.head_dim;
    const std::int64_t qd = c.num_heads * hd, kd = c.num_kv_heads * hd, inter = c.intermediate_size;
    x_.resize(static_cast<std::size_t>(m * h));
    hn_.resize(x_.size());
    tmp_.resize(x_.size());
    q_.resize(static_cast<std::size_t>(m * qd));
    attn_.resize(q_.size());
    k_.resize(static_cast<std::size_t>(m * kd));
    v_.resize(k_.size());
    k_tmp_.resize(k_.size());
    g_.resize(static_cast<std::size_t>(m * inter));
    u_.resize(g_.size());
    a_.resize(g_.size());
    const std::size_t row_bytes = static_cast<std::size_t>(h) * element_size(embed_dtype_);
    for (std::int64_t r = 0; r < m; ++r) {
      widen_to_f32(embed_dtype_,
                   embed_.data() + static_cast<std::size_t>(plan.tokens[r]) * row_bytes, h,
                   x_.data() + r * h);
    }
    ThreadPool* pool = &pool_;
    for (std::int64_t li = 0; li < c.num_layers; ++li) {
      const Layer& l = layers_[static_cast<std::size_t>(li)];
      kernels::rms_norm(x_.data(), h, l.input_norm.data(), c.rms_norm_eps, hn_.data(), h, m, h,
                        pool);
      l.q.run(hn_.data(), h, m, q_.data(), qd, pool);
      l.k.run(hn_.data(), h, m, k_.data(), kd, pool);
      l.v.run(hn_.data(), h, m, v_.data(), kd, pool);
      if (c.qk_norm) {
        // Per-head RMSNorm: each head vector is one row of length head_dim.
        kernels::rms_norm(q_.data(), hd, l.q_norm.data(), c.rms_norm_eps, attn_.data(), hd,
                          m * c.num_heads, hd, pool);
        std::swap(q_, attn_);
        kernels::rms_norm(k_.data(), hd, l.k_norm.data(), c.rms_norm_eps, k_tmp_.data(), hd,
                          m * c.num_kv_heads, hd, pool);
        std::swap(k_, k_tmp_);
      }
      float* kp = kv.k_pool(li);
      float* vp = kv.v_pool(li);
      for (std::int64_t r = 0; r < m; ++r) {
        const std::int64_t pos = plan.positions[static_cast<std::size_t>(r)];
        kernels::rope(q_.data() + r * qd, c.num_heads, hd, hd, rope_.cos(pos), rope_.sin(pos));
        kernels::rope(k_.data() + r * kd, c.num_kv_heads, hd, hd, rope_.cos(pos), rope_.sin(pos));
        const std::int64_t slot = plan.kv_slots[static_cast<std::size_t>(r)];
        std::memcpy(kp + slot * kd, k_.data() + r * kd, static_cast<std::size_t>(kd) * 4);
        std::memcpy(vp + slot * kd, v_.data() + r * kd, static_cast<std::size_t>(kd) * 4);
      }
      for (const BatchPlan::Seq& s : plan.seqs) {
        kernels::PagedKvView view;
        view.k_pool = kp;
        view.v_pool = vp;
        view.block_table = s.block_table;
        view.num_blocks = s.num_blocks;
        view.block_size = kv.block_size();
        view.num_kv_heads = c.num_kv_heads;
        view.head_dim = hd;
        kernels::attention(q_.data() + s.row_begin * qd, qd, s.rows,
                           plan.num_keys.data() + s.row_begin, c.num_heads, view, attention_scale_,
                           attn_.data() + s.row_begin * qd, qd, pool);
      }
      l.o.run(attn_.data(), qd, m, tmp_.data(), h, pool);
      add_into(x_.data(), tmp_.data(), m * h);
      kernels::rms_norm(x_.data(), h, l.post_norm.data(), c.rms_norm_eps, hn_.data(), h, m, h,
                        pool);
      l.gate.run(hn_.data(), h, m, g_.data(), inter, pool);
      l.up.run(hn_.data(), h, m, u_.data(), inter, pool);
      kernels::silu_mul(g_.data(), u_.data(), a_.data(), m * inter);
      l.down.run(a_.data(), inter, m, tmp_.data(), h, pool);
      add_into(x_.data(), tmp_.data(), m * h);
    }
    // Final norm and lm_head only for the rows whose logits are wanted.
    const auto rows = static_cast<std::int64_t>(plan.logit_rows.size());
    for (std::int64_t i = 0; i < rows; ++i) {
      std::memcpy(tmp_.data() + i * h, x_.data() + plan.logit_rows[static_cast<std::size_t>(i)] * h,
                  static_cast<std::size_t>(h) * 4);
    }
    kernels::rms_norm(tmp_.data(), h, final_norm_.data(), c.rms_norm_eps, hn_.data(), h, rows, h,
                      pool);
    const std::size_t base = logits.size();
    logits.resize(base + static_cast<std::size_t>(rows * c.vocab_size));
    lm_head_.run(hn_.data(), h, rows, logits.data() + base, c.vocab_size, pool);
  }

  static void add_into(float* x, const float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] + y[i];
  }

  ThreadPool pool_;
  std::vector<Layer> layers_;
  std::vector<std::uint8_t> embed_;
  TensorDType embed_dtype_ = TensorDType::kF32;
  std::vector<float> final_norm_;
  kernels::PackedLinear lm_head_;
  // Activations, reused across steps.
  std::vector<float> x_, hn_, tmp_, q_, k_, v_, k_tmp_, attn_, g_, u_, a_;
};

}  // namespace

std::unique_ptr<TransformerBase> make_canonical_model(const ModelConfig& config,
                                                      const TensorStore& store,
                                                      const ModelOptions& options) {
  return std::make_unique<CanonicalModel>(config, store, options);
}

}  // namespace detinfer
