// The fast forward pass: the same transformer with libtorch ops (at::linear over
// OpenBLAS/MKL-DNN, at::softmax, ...). No reproducibility guarantee beyond libtorch's
// own; it exists so that users and benchmarks can compare against canonical mode on the
// same model. With the ops it composes (fast_ops.cpp, fast_moe.cpp), the only TUs of the
// model that include libtorch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>
#include <memory>

#include "core/check.h"
#include "model/fast_ops.h"
#include "model/gemma_config.h"
#include "model/model_factories.h"
#include "model/transformer_base.h"

// OpenBLAS (libtorch's BLAS on Debian) runs its own thread pool, sized to the machine and
// independent of at::set_num_threads; weak so that a libtorch on another BLAS still links.
extern "C" void openblas_set_num_threads(int num_threads) __attribute__((weak));

namespace detinfer::model {
namespace {

struct Layer {
  // post_norm: post_attention_layernorm; post_ff_norm / pre_ff_norm: post_feedforward_ /
  // pre_feedforward_layernorm (OLMo 2, Gemma).
  at::Tensor input_norm, post_norm, post_ff_norm, pre_ff_norm, q_norm, k_norm;
  at::Tensor q_bias, k_bias, v_bias;
  at::Tensor q, k, v, o, gate, up, down;
  std::unique_ptr<fast::MoeTensors> moe;  // the sparse MLP (MoE layers), instead of gate/up/down
};

// A RoPE table's cos and sin at the step's rows' positions: [rows, 1, rope_dims / 2] each.
struct RopeRows {
  at::Tensor cos, sin;
};

class FastModel final : public TransformerBase, private WeightSink {
 public:
  FastModel(const ModelConfig& config, const TensorSource& store, const ModelOptions& options)
      : TransformerBase(config, options), layers_(static_cast<std::size_t>(config.num_layers)) {
    // The matmuls (OpenBLAS) get the threads; libtorch's own OpenMP pool stays at one
    // thread, since two spinning pools on the same cores slow each other down several-fold
    // (docs/performance.md). Both settings are process-wide: the last fast model loaded wins.
    if (openblas_set_num_threads != nullptr) {
      openblas_set_num_threads(options.threads);
      at::set_num_threads(1);
    } else {
      at::set_num_threads(options.threads);
    }
    for (std::int64_t li = 0; li < config_.num_layers; ++li) {
      if (is_moe_layer(config_, li)) {
        layers_[static_cast<std::size_t>(li)].moe =
            std::make_unique<fast::MoeTensors>(config_.moe.num_experts);
      }
    }
    const LoadedWeights w = stream_weights(config_, store, *this);
    if (config_.tie_word_embeddings) lm_head_ = embed_;
    // A decode row reads k of each sparse layer's E experts.
    const std::int64_t e = config_.moe.num_experts;
    const std::int64_t unrouted = e > 0 ? expert_bytes_ / e * (e - config_.moe.experts_per_tok) : 0;
    // An untied embedding table only serves row lookups; a tied one is the lm_head too.
    set_loaded(w, resident_,
               config_.tie_word_embeddings ? 0 : static_cast<std::int64_t>(embed_.numel() * 4),
               unrouted);
  }

 private:
  // Where a layer's norm weight or bias goes (nullptr for the other kinds).
  static at::Tensor* vector_slot(WeightKind kind, Layer& l) {
    switch (kind) {
      case WeightKind::kInputNorm:
        return &l.input_norm;
      case WeightKind::kPostNorm:
        return &l.post_norm;
      case WeightKind::kPostFfNorm:
        return &l.post_ff_norm;
      case WeightKind::kPreFfNorm:
        return &l.pre_ff_norm;
      case WeightKind::kQNorm:
        return &l.q_norm;
      case WeightKind::kKNorm:
        return &l.k_norm;
      case WeightKind::kQBias:
        return &l.q_bias;
      case WeightKind::kKBias:
        return &l.k_bias;
      case WeightKind::kVBias:
        return &l.v_bias;
      default:
        return nullptr;
    }
  }

  // Where a layer's projection goes (nullptr for the other kinds).
  static at::Tensor* linear_slot(WeightKind kind, Layer& l) {
    switch (kind) {
      case WeightKind::kQ:
        return &l.q;
      case WeightKind::kK:
        return &l.k;
      case WeightKind::kV:
        return &l.v;
      case WeightKind::kO:
        return &l.o;
      case WeightKind::kGate:
        return &l.gate;
      case WeightKind::kUp:
        return &l.up;
      case WeightKind::kDown:
        return &l.down;
      default:
        return nullptr;
    }
  }

  void take(const WeightSpec& s, core::DType dtype, const void* data) override {
    // Weights are widened to f32 once; libtorch's CPU bf16/f16 matmuls are slow.
    at::Tensor t = at::empty(s.shape, at::kFloat);
    widen_to_f32(dtype, data, t.numel(), t.data_ptr<float>());
    if (s.kind != WeightKind::kLmHead || !config_.tie_word_embeddings) {
      resident_ += static_cast<std::int64_t>(t.numel() * 4);
    }
    // Gemma: every RMSNorm weight w is applied as float(1 + w), rounded once here.
    if (config_.norm_plus_one && is_norm_kind(s.kind)) t.add_(1.0);
    if (s.kind == WeightKind::kEmbed) {
      embed_ = t;
      embed_dtype_ = dtype;
      return;
    }
    if (s.kind == WeightKind::kLmHead) {
      lm_head_ = t;
      return;
    }
    if (s.kind == WeightKind::kFinalNorm) {
      final_norm_ = t;
      return;
    }
    take_layer(s, t, layers_[static_cast<std::size_t>(s.layer)]);
  }

  void take_layer(const WeightSpec& s, const at::Tensor& t, Layer& l) {
    if (at::Tensor* slot = l.moe ? l.moe->slot(s.kind, s.expert) : nullptr) {
      *slot = t;
      if (s.expert >= 0) expert_bytes_ += static_cast<std::int64_t>(t.numel() * 4);
    } else if (at::Tensor* v = vector_slot(s.kind, l)) {
      *v = t;
    } else if (at::Tensor* w = linear_slot(s.kind, l)) {
      *w = t;
    } else if (s.kind == WeightKind::kQkv) {  // Phi-3: [q | k | v] rows (views of the one tensor)
      const std::int64_t qd = config_.num_heads * config_.head_dim;
      const std::int64_t kd = config_.num_kv_heads * config_.head_dim;
      l.q = t.narrow(0, 0, qd);
      l.k = t.narrow(0, qd, kd);
      l.v = t.narrow(0, qd + kd, kd);
    } else if (s.kind == WeightKind::kGateUp) {  // Phi-3: [gate | up] rows
      l.gate = t.narrow(0, 0, config_.intermediate_size);
      l.up = t.narrow(0, config_.intermediate_size, config_.intermediate_size);
    } else {
      fail(ErrorCode::kInternal, "fast mode: no place for tensor ", s.name);
    }
  }

  RopeRows rope_rows(const RopeTable& table, const BatchPlan& plan) const {
    const std::int64_t m = plan.rows, half = rope_dims(config_) / 2;
    RopeRows out{at::empty({m, 1, half}, at::kFloat), at::empty({m, 1, half}, at::kFloat)};
    for (std::int64_t r = 0; r < m; ++r) {
      const std::int64_t pos = plan.positions[static_cast<std::size_t>(r)];
      std::memcpy(out.cos.data_ptr<float>() + r * half, table.cos(pos),
                  static_cast<std::size_t>(half) * 4);
      std::memcpy(out.sin.data_ptr<float>() + r * half, table.sin(pos),
                  static_cast<std::size_t>(half) * 4);
    }
    return out;
  }

  // A sublayer's output as added to the residual stream: through `norm` when the layers
  // norm their sublayers' outputs (OLMo 2, Gemma).
  at::Tensor sublayer_out(const at::Tensor& y, const at::Tensor& norm) const {
    if (config_.norm_placement == NormPlacement::kPre) return y;
    return fast::rms_norm(y, norm, config_.rms_norm_eps);
  }

  // A sublayer's input: x itself (post-norm layers), else rms_norm(x, norm).
  at::Tensor sublayer_in(const at::Tensor& x, const at::Tensor& norm) const {
    if (config_.norm_placement == NormPlacement::kPost) return x;
    return fast::rms_norm(x, norm, config_.rms_norm_eps);
  }

  // One decoder layer over x [rows, hidden] (docs/numerics.md, "Model composition").
  at::Tensor run_layer(const at::Tensor& x0, const Layer& l, const RopeRows& rr,
                       const BatchPlan& plan, KvCachePool& kv, std::int64_t li) const {
    const ModelConfig& c = config_;
    const std::int64_t m = plan.rows, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
    const at::Tensor hn = sublayer_in(x0, l.input_norm);
    at::Tensor q = fast::linear(hn, l.q, l.q_bias);
    at::Tensor k = fast::linear(hn, l.k, l.k_bias);
    const at::Tensor v = fast::linear(hn, l.v, l.v_bias).contiguous();
    if (c.qk_norm == QkNorm::kFullWidth) {
      q = fast::rms_norm(q, l.q_norm, c.rms_norm_eps);
      k = fast::rms_norm(k, l.k_norm, c.rms_norm_eps);
    }
    q = q.view({m, nh, hd});
    k = k.view({m, nkv, hd});
    if (c.qk_norm == QkNorm::kPerHead) {
      q = fast::rms_norm(q, l.q_norm, c.rms_norm_eps);
      k = fast::rms_norm(k, l.k_norm, c.rms_norm_eps);
    }
    q = fast::rope(q, rr.cos, rr.sin).contiguous();
    k = fast::rope(k, rr.cos, rr.sin).contiguous();
    const at::Tensor attn = fast::attend(c, attention_scale_, q, k, v, plan, kv, li);
    const at::Tensor x = x0 + sublayer_out(fast::linear(attn, l.o), l.post_norm);
    // Pre-norm layers: post_attention_layernorm normalizes the MLP's input; Gemma:
    // pre_feedforward_layernorm.
    const bool sandwich = c.norm_placement == NormPlacement::kSandwich;
    const at::Tensor mlp_in = sublayer_in(x, sandwich ? l.pre_ff_norm : l.post_norm);
    const at::Tensor y = l.moe ? fast::moe_mlp(*l.moe, mlp_in, c.moe)
                               : fast::gated_mlp(mlp_in, l.gate, l.up, l.down, c.hidden_act);
    return x + sublayer_out(y, l.post_ff_norm);
  }

  void run(const BatchPlan& plan, KvCachePool& kv, const LogitsAppend& append) override {
    at::NoGradGuard no_grad;
    const ModelConfig& c = config_;
    const at::Tensor tokens =
        at::from_blob(const_cast<std::int32_t*>(plan.tokens.data()), {plan.rows}, at::kInt)
            .to(at::kLong);
    const RopeRows global = rope_rows(rope_, plan);
    // Gemma 3: the windowed layers' own table.
    const RopeRows local = rope_local_ != nullptr ? rope_rows(*rope_local_, plan) : global;
    at::Tensor x = embed_.index_select(0, tokens);
    if (c.scale_embeddings) x = x * gemma_embed_scale(c.hidden_size, embed_dtype_);
    for (std::int64_t li = 0; li < c.num_layers; ++li) {
      x = run_layer(x, layers_[static_cast<std::size_t>(li)],
                    layer_is_sliding(c, li) ? local : global, plan, kv, li);
    }
    at::Tensor rows = at::empty({static_cast<std::int64_t>(plan.logit_rows.size())}, at::kLong);
    std::memcpy(rows.data_ptr<std::int64_t>(), plan.logit_rows.data(), plan.logit_rows.size() * 8);
    at::Tensor out = fast::linear(
        fast::rms_norm(x.index_select(0, rows), final_norm_, c.rms_norm_eps), lm_head_);
    if (c.final_logit_softcapping > 0.0) {  // Gemma 2: tanh(l / cap) * cap
      out = at::tanh(out / c.final_logit_softcapping) * c.final_logit_softcapping;
    }
    out = out.contiguous();
    std::memcpy(append(static_cast<std::size_t>(out.numel())), out.data_ptr<float>(),
                static_cast<std::size_t>(out.numel()) * 4);
  }

  std::vector<Layer> layers_;
  at::Tensor embed_, lm_head_, final_norm_;
  core::DType embed_dtype_ = core::DType::kF32;
  std::int64_t resident_ = 0;
  std::int64_t expert_bytes_ = 0;  // the sparse layers' experts (not the shared expert)
};

}  // namespace

std::unique_ptr<TransformerBase> make_fast_model(const ModelConfig& config,
                                                 const TensorSource& store,
                                                 const ModelOptions& options) {
  return std::make_unique<FastModel>(config, store, options);
}

}  // namespace detinfer::model
