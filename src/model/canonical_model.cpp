// The forward pass, written once over the Backend seam (model/backend.h): the CPU backend
// runs kernels:: (numerics spec v1), the CUDA backend kernels::cuda:: (canonical: the same
// bits; device-invariant: tensor cores). Every op treats rows independently, so a row's
// result does not depend on which other rows (chunks, sequences) share the step, nor on
// the thread count.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/thread_pool.h"
#include "model/canonical_layer.h"
#include "model/gemma_config.h"
#include "model/model_factories.h"
#include "model/quantize_weights.h"
#include "model/transformer_base.h"

namespace detinfer::model {
namespace {

// Activations of one step, in the backend's memory; grown, never shrunk.
struct Activations {
  BackendBuffer x, hn, tmp, q, k, v, k_tmp, attn, g, u, a, logits;
  std::int64_t rows = 0;
  std::int64_t logit_rows = 0;
};

class CanonicalModel final : public TransformerBase, private WeightSink {
 public:
  CanonicalModel(const ModelConfig& config, const TensorSource& store, const ModelOptions& options,
                 std::shared_ptr<Backend> backend)
      : TransformerBase(config, options),
        backend_(backend != nullptr ? std::move(backend) : make_backend(options)),
        layers_(static_cast<std::size_t>(config.num_layers)),
        biases_(layers_.size()),
        moe_block_(config_, *backend_) {
    const bool gemma = config.hidden_act != Activation::kSilu || config.norm_plus_one ||
                       config.scale_embeddings || config.attn_logit_softcapping > 0.0 ||
                       config.final_logit_softcapping > 0.0 || config.rope_local_theta > 0.0;
    if (gemma && !backend_->has_gemma_ops()) {
      throw Error(ErrorCode::kUnsupported,
                  str_cat(to_string(config.architecture), ": backend ", backend_->name(),
                          " lacks the Gemma ops"),
                  "backend");
    }
    for (std::int64_t li = 0; li < config_.num_layers; ++li) {
      if (is_moe_layer(config_, li)) {
        layers_[static_cast<std::size_t>(li)].moe =
            std::make_unique<MoeWeights>(config_.moe.num_experts);
      }
    }
    // Quantizing on load splits each tensor's rows over the session's threads while the
    // weights stream in (the same blocks for any thread count).
    std::unique_ptr<core::ThreadPool> quant_pool;
    if (options_.weights && options.threads > 1) {
      quant_pool = std::make_unique<core::ThreadPool>(options.threads);
      quant_pool_ = quant_pool.get();
    }
    const LoadedWeights w = stream_weights(config_, store, *this);
    quant_pool_ = nullptr;
    biases_.clear();
    auto resident = static_cast<std::int64_t>(embed_.bytes() + final_norm_.bytes() +
                                              (lm_head_ ? lm_head_->bytes() : 0));
    for (const CanonicalLayer& l : layers_) {
      for (const BackendBuffer* b :
           {&l.input_norm, &l.post_norm, &l.post_ff_norm, &l.q_norm, &l.k_norm, &l.pre_ff_norm}) {
        resident += static_cast<std::int64_t>(b->bytes());
      }
      for (const auto* p : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
        if (*p) resident += static_cast<std::int64_t>((*p)->bytes());
      }
      if (l.moe) resident += static_cast<std::int64_t>(l.moe->bytes());
    }
    std::int64_t unrouted = 0;  // experts a decode row is not routed to
    for (const CanonicalLayer& l : layers_) {
      if (l.moe)
        unrouted += static_cast<std::int64_t>(l.moe->unrouted_bytes(config_.moe.experts_per_tok));
    }
    // A kept embedding table only serves row lookups (lm_head is packed separately).
    set_loaded(w, resident, static_cast<std::int64_t>(embed_.bytes()), unrouted);
  }

  std::shared_ptr<Backend> kv_backend() const override { return backend_; }
  void host_parallel_for(std::int64_t n,
                         const std::function<void(std::int64_t, std::int64_t)>& fn) override {
    backend_->host_parallel_for(n, fn);
  }
  std::string stored_quant_formats() const override {
    std::string out;
    for (const std::string& f : stored_formats_) out += (out.empty() ? "" : "+") + f;
    return out;
  }
  DeviceInfo device_info() const override { return backend_->device_info(); }

 private:
  BackendBuffer upload_f32(const WeightSpec& s, core::DType dtype, const void* data) {
    std::vector<float> v = to_f32(s, dtype, data);
    // Gemma: every RMSNorm weight (the only f32 uploads) is applied as float(1 + w) (GGUF:
    // stored so already).
    if (config_.norm_plus_one && !s.norm_plus_one_applied) {
      for (float& x : v) x = 1.0f + x;
    }
    return backend_->upload_new(v.data(), v.size() * sizeof(float));
  }

  void take(const WeightSpec& s, core::DType dtype, const void* data) override {
    if (take_moe(s, dtype, data)) return;
    const core::DType kd = dtype;
    const auto li = static_cast<std::size_t>(s.layer);
    auto pack = [&](const std::vector<float>* bias) {
      const bool with_bias = bias != nullptr && config_.attention_bias;
      if (with_bias) DETINFER_INTERNAL_CHECK(!bias->empty());
      return linear_of(s, data, kd, s.shape[0], s.shape[1], with_bias ? bias->data() : nullptr);
    };
    CanonicalLayer* l = s.layer >= 0 ? &layers_[li] : nullptr;
    CanonicalLayerBiases* b = s.layer >= 0 ? &biases_[li] : nullptr;
    if (is_norm_kind(s.kind)) {
      *norm_slot(s.kind, l, final_norm_) = upload_f32(s, dtype, data);
      return;
    }
    switch (s.kind) {
      case WeightKind::kEmbed:
        embed_dtype_ = kd;
        if (config_.tie_word_embeddings) lm_head_ = pack(nullptr);
        // One copy of a tied table: rows are read back from the lm_head when it can.
        if (!config_.tie_word_embeddings || !backend_->linear_serves_rows()) {
          embed_ = backend_->upload_new(
              data, static_cast<std::size_t>(s.shape[0] * s.shape[1]) * core::dtype_size(dtype));
        }
        break;
      case WeightKind::kLmHead:
        lm_head_ = pack(nullptr);
        break;
      case WeightKind::kQBias:
        b->q = to_f32(s, dtype, data);
        break;
      case WeightKind::kKBias:
        b->k = to_f32(s, dtype, data);
        break;
      case WeightKind::kVBias:
        b->v = to_f32(s, dtype, data);
        break;
      case WeightKind::kQ:
        l->q = pack(&b->q);
        break;
      case WeightKind::kK:
        l->k = pack(&b->k);
        break;
      case WeightKind::kV:
        l->v = pack(&b->v);
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
      case WeightKind::kQkv:
      case WeightKind::kGateUp:
        take_fused_native(s, dtype, data, *l);
        break;
      default:  // the norms (above) and the MoE kinds (take_moe)
        break;
    }
  }

  // A router or expert tensor of a sparse layer (false for the other kinds). The routers
  // (and Qwen2-MoE's shared-expert gate row) keep their stored float type, as llama.cpp
  // does; the experts are linears like any other (quantized on load under weights=).
  bool take_moe(const WeightSpec& s, core::DType dtype, const void* data) {
    if (s.layer < 0) return false;
    MoeWeights* moe = layers_[static_cast<std::size_t>(s.layer)].moe.get();
    std::unique_ptr<BackendLinear>* slot = moe ? moe->slot(s.kind, s.expert) : nullptr;
    if (slot == nullptr) return false;
    const bool router = s.kind == WeightKind::kRouter || s.kind == WeightKind::kSharedGate;
    *slot = router ? backend_->make_linear(data, dtype, s.shape[0], s.shape[1], nullptr)
                   : linear_of(s, data, dtype, s.shape[0], s.shape[1], nullptr);
    return true;
  }

  void take_fused_native(const WeightSpec& s, core::DType dtype, const void* data,
                         CanonicalLayer& l) {
    take_fused(s, l, [&](std::int64_t row0, std::int64_t rows) {
      const std::size_t at = static_cast<std::size_t>(row0 * s.shape[1]) * core::dtype_size(dtype);
      return linear_of(s, static_cast<const std::uint8_t*>(data) + at, dtype, rows, s.shape[1],
                       nullptr);
    });
  }

  // A linear ([n][k] of dtype, rows of tensor s): as stored, or quantized on load in the
  // format options_.weights picks for s (quantized spec v1).
  std::unique_ptr<BackendLinear> linear_of(const WeightSpec& s, const void* w, core::DType dtype,
                                           std::int64_t n, std::int64_t k, const float* bias) {
    if (!options_.weights) return backend_->make_linear(w, dtype, n, k, bias);
    const std::optional<kernels::QuantFormat> f = scheme_format_for(*options_.weights, s, config_);
    DETINFER_INTERNAL_CHECK(f.has_value());
    const std::vector<std::uint8_t> q = quantize_weights(s.name, w, dtype, n, k, *f, quant_pool_);
    return backend_->make_quantized_linear(q.data(), *f, n, k, bias);
  }

  // Float tensors, and the GGUF types of quantized spec v1 where the backend has kernels.
  bool accepts(const TensorFormat& format) const override {
    return format.is_float || (quant_format_of(format) && backend_->has_quantized_kernels());
  }

  // An already-quantized tensor (GGUF): linears are made from its blocks as they are; a
  // tied embedding is the lm_head (rows read back dequantized, exactly); an untied
  // embedding table and any 1-D tensor are dequantized exactly to f32 and taken as such.
  void take_quantized(const WeightSpec& s, kernels::QuantFormat f, const void* blocks) override {
    stored_formats_.insert(kernels::to_string(f));
    const bool tied_rows = config_.tie_word_embeddings && backend_->linear_serves_rows();
    if (!is_linear_kind(s.kind) && !(s.kind == WeightKind::kEmbed && tied_rows)) {
      const std::vector<float> v = dequantize_tensor(s, f, blocks);
      take(s, core::DType::kF32, v.data());
      return;
    }
    const std::int64_t n = s.shape[0], k = s.shape[1];
    const std::int64_t row_bytes = kernels::quant_row_bytes(f, k);
    auto make = [&](std::int64_t row0, std::int64_t rows, const std::vector<float>* bias) {
      const bool with_bias = bias != nullptr && config_.attention_bias && !bias->empty();
      return backend_->make_quantized_linear(
          static_cast<const std::uint8_t*>(blocks) + row0 * row_bytes, f, rows, k,
          with_bias ? bias->data() : nullptr);
    };
    CanonicalLayer* l = s.layer >= 0 ? &layers_[static_cast<std::size_t>(s.layer)] : nullptr;
    CanonicalLayerBiases* b = s.layer >= 0 ? &biases_[static_cast<std::size_t>(s.layer)] : nullptr;
    switch (s.kind) {
      case WeightKind::kEmbed:
      case WeightKind::kLmHead:
        embed_dtype_ = core::DType::kF32;
        lm_head_ = make(0, n, nullptr);
        break;
      case WeightKind::kQ:
        l->q = make(0, n, &b->q);
        break;
      case WeightKind::kK:
        l->k = make(0, n, &b->k);
        break;
      case WeightKind::kV:
        l->v = make(0, n, &b->v);
        break;
      case WeightKind::kQkv:
      case WeightKind::kGateUp:
        take_fused(s, *l,
                   [&](std::int64_t row0, std::int64_t rows) { return make(row0, rows, nullptr); });
        break;
      default:
        if (auto* slot = l->moe ? l->moe->slot(s.kind, s.expert) : nullptr) {
          *slot = make(0, n, nullptr);
        } else {
          *linear_slot(s.kind, *l) = make(0, n, nullptr);
        }
        break;
    }
  }

  // Phi-3's fused projections, split by rows into the layer's linears: each part is a
  // contiguous run of whole rows of the [n][k] tensor, prepared (copied) like any other by
  // part(row0, rows).
  template <typename Part>
  void take_fused(const WeightSpec& s, CanonicalLayer& l, const Part& part) {
    if (s.kind == WeightKind::kQkv) {
      const std::int64_t qd = config_.num_heads * config_.head_dim;
      const std::int64_t kd = config_.num_kv_heads * config_.head_dim;
      l.q = part(0, qd);
      l.k = part(qd, kd);
      l.v = part(qd + kd, kd);
    } else {
      l.gate = part(0, config_.intermediate_size);
      l.up = part(config_.intermediate_size, config_.intermediate_size);
    }
  }

  // Grows the activation buffers to hold `m` rows and `lr` logits rows.
  void reserve(std::int64_t m, std::int64_t lr) {
    const ModelConfig& c = config_;
    Activations& a = act_;
    auto grow = [&](BackendBuffer& b, std::int64_t floats) {
      const auto bytes = static_cast<std::size_t>(floats) * sizeof(float);
      if (b.bytes() < bytes) b = backend_->alloc(bytes);
    };
    if (m > a.rows) {
      const std::int64_t qd = c.num_heads * c.head_dim, kd = c.num_kv_heads * c.head_dim;
      for (BackendBuffer* b : {&a.x, &a.hn, &a.tmp}) grow(*b, m * c.hidden_size);
      for (BackendBuffer* b : {&a.q, &a.attn}) grow(*b, m * qd);
      for (BackendBuffer* b : {&a.k, &a.v, &a.k_tmp}) grow(*b, m * kd);
      // (Not for a model whose every MLP is sparse: MoeBlock has its own.)
      const bool dense = std::any_of(layers_.begin(), layers_.end(),
                                     [](const CanonicalLayer& l) { return l.moe == nullptr; });
      for (BackendBuffer* b : {&a.g, &a.u, &a.a}) grow(*b, dense ? m * c.intermediate_size : 1);
      a.rows = m;
    }
    if (lr > a.logit_rows && !backend_->computes_in_host_memory()) {
      grow(a.logits, lr * c.vocab_size);
      a.logit_rows = lr;
    }
    moe_block_.reserve(m);
    std::size_t held = moe_block_.scratch_bytes();
    for (const BackendBuffer* b :
         {&a.x, &a.hn, &a.tmp, &a.q, &a.k, &a.v, &a.k_tmp, &a.attn, &a.g, &a.u, &a.a, &a.logits}) {
      held += b->bytes();
    }
    set_scratch_bytes(static_cast<std::int64_t>(held));
  }

  // q and k RMSNorm (before RoPE): per head (rows of head_dim) or over the whole projection.
  void qk_norm(const CanonicalLayer& l, std::int64_t m) {
    const ModelConfig& c = config_;
    Backend& be = *backend_;
    Activations& a = act_;
    const std::int64_t hd = c.head_dim;
    const std::int64_t qd = c.num_heads * hd, kd = c.num_kv_heads * hd;
    const bool full = c.qk_norm == QkNorm::kFullWidth;
    const std::int64_t qn = full ? qd : hd, q_rows = full ? m : m * c.num_heads;
    const std::int64_t kn = full ? kd : hd, k_rows = full ? m : m * c.num_kv_heads;
    be.rms_norm(a.q.as<float>(), qn, l.q_norm.as<float>(), c.rms_norm_eps, a.attn.as<float>(), qn,
                q_rows, qn);
    std::swap(a.q, a.attn);
    be.rms_norm(a.k.as<float>(), kn, l.k_norm.as<float>(), c.rms_norm_eps, a.k_tmp.as<float>(), kn,
                k_rows, kn);
    std::swap(a.k, a.k_tmp);
  }

  // x += sublayer output `out` (m rows of hidden), through `norm` first when the layer
  // puts its norms after the sublayers (OLMo 2); `norm` is unused otherwise.
  void residual_add(const BackendBuffer& norm, float* out, std::int64_t m) {
    const std::int64_t h = config_.hidden_size;
    float* x = act_.x.as<float>();
    if (config_.norm_placement != NormPlacement::kPre) {  // OLMo 2, Gemma
      float* hn = act_.hn.as<float>();
      backend_->rms_norm(out, h, norm.as<float>(), config_.rms_norm_eps, hn, h, m, h);
      out = hn;
    }
    backend_->add(x, out, x, m * h);
  }

  // The sublayer's input: x itself (post-norm layers), else rms_norm(x, norm) in hn.
  const float* sublayer_input(const BackendBuffer& norm, std::int64_t m) {
    const std::int64_t h = config_.hidden_size;
    if (config_.norm_placement == NormPlacement::kPost) return act_.x.as<float>();
    float* hn = act_.hn.as<float>();
    backend_->rms_norm(act_.x.as<float>(), h, norm.as<float>(), config_.rms_norm_eps, hn, h, m, h);
    return hn;
  }

  void run_layer(const CanonicalLayer& l, KvCachePool& kv, std::int64_t li, std::int64_t m) {
    const ModelConfig& c = config_;
    Backend& be = *backend_;
    Activations& a = act_;
    const std::int64_t h = c.hidden_size, hd = c.head_dim;
    const std::int64_t qd = c.num_heads * hd, kd = c.num_kv_heads * hd, inter = c.intermediate_size;
    float* tmp = a.tmp.as<float>();
    be.project_qkv(*l.q, *l.k, *l.v, sublayer_input(l.input_norm, m), m, a.q.as<float>(),
                   a.k.as<float>(), a.v.as<float>());
    if (c.qk_norm != QkNorm::kNone) qk_norm(l, m);
    const bool sliding = layer_is_sliding(c, li);
    if (rope_local_ != nullptr) be.set_rope(sliding ? *rope_local_ : rope_);  // Gemma 3
    be.rope(a.q.as<float>(), qd, c.num_heads, hd, rope_dims(c));
    be.rope(a.k.as<float>(), kd, c.num_kv_heads, hd, rope_dims(c));
    KvLayer layer;
    layer.k_pool = kv.k_pool(li);
    layer.v_pool = kv.v_pool(li);
    layer.block_size = kv.block_size();
    layer.num_kv_heads = c.num_kv_heads;
    layer.head_dim = hd;
    layer.kv_dtype = kv.kv_dtype();  // = options_.kv_dtype (checked by forward)
    layer.window = sliding ? c.sliding_window : 0;
    layer.softcap = static_cast<float>(c.attn_logit_softcapping);
    be.kv_write(a.k.as<float>(), a.v.as<float>(), kd, layer);
    be.attention(a.q.as<float>(), qd, c.num_heads, layer, attention_scale_, a.attn.as<float>(), qd);
    be.linear(*l.o, a.attn.as<float>(), qd, m, tmp, h);
    residual_add(l.post_norm, tmp, m);
    // Pre-norm layers: post_attention_layernorm normalizes the MLP's input; Gemma:
    // pre_feedforward_layernorm.
    const bool sandwich = c.norm_placement == NormPlacement::kSandwich;
    const float* mlp_in = sublayer_input(sandwich ? l.pre_ff_norm : l.post_norm, m);
    if (l.moe) {
      moe_block_.run(*l.moe, mlp_in, m, tmp);
      residual_add(l.post_ff_norm, tmp, m);
      return;
    }
    if (c.hidden_act == Activation::kGeluTanh) {
      be.mlp_gate_up_gelu(*l.gate, *l.up, mlp_in, m, a.g.as<float>(), a.u.as<float>(),
                          a.a.as<float>());
    } else {
      be.mlp_gate_up(*l.gate, *l.up, mlp_in, m, a.g.as<float>(), a.u.as<float>(), a.a.as<float>());
    }
    be.linear(*l.down, a.a.as<float>(), inter, m, tmp, h);
    residual_add(l.post_ff_norm, tmp, m);  // (pre-norm layers: a plain add)
  }

  void run(const BatchPlan& plan, KvCachePool& kv, const LogitsAppend& append) override {
    const ModelConfig& c = config_;
    Backend& be = *backend_;
    const std::int64_t m = plan.rows, h = c.hidden_size;
    const auto rows = static_cast<std::int64_t>(plan.logit_rows.size());
    reserve(m, rows);
    be.begin_step(plan, rope_);
    if (embed_.data() != nullptr) {
      be.embedding(embed_.data(), embed_dtype_, c.vocab_size, h, act_.x.as<float>());
    } else {
      be.embedding_from_linear(*lm_head_, act_.x.as<float>());
    }
    if (c.scale_embeddings) be.scale(act_.x.as<float>(), gemma_embed_scale(h, embed_dtype_), m * h);
    for (std::int64_t li = 0; li < c.num_layers; ++li) {
      run_layer(layers_[static_cast<std::size_t>(li)], kv, li, m);
    }
    // Final norm and lm_head only for the rows whose logits are wanted.
    float* tmp = act_.tmp.as<float>();
    float* hn = act_.hn.as<float>();
    be.gather_logit_rows(act_.x.as<float>(), h, h, tmp);
    be.rms_norm(tmp, h, final_norm_.as<float>(), c.rms_norm_eps, hn, h, rows, h);
    // On a host backend the lm_head writes into the caller's rows itself (a 256-row verify
    // pass of a 151936-token vocabulary would otherwise copy 155 MB).
    float* const dst = append(static_cast<std::size_t>(rows * c.vocab_size));
    const bool direct = be.computes_in_host_memory();
    float* out = direct ? dst : act_.logits.as<float>();
    be.linear(*lm_head_, hn, h, rows, out, c.vocab_size);
    if (c.final_logit_softcapping > 0.0)
      be.softcap(out, static_cast<float>(c.final_logit_softcapping), rows * c.vocab_size);
    if (!direct) be.copy_out(out, rows * c.vocab_size, dst);
  }

  std::shared_ptr<Backend> backend_;
  core::ThreadPool* quant_pool_ = nullptr;  // while loading with quantization on load
  std::set<std::string> stored_formats_;    // quantized formats of the file's tensors
  std::vector<CanonicalLayer> layers_;
  std::vector<CanonicalLayerBiases> biases_;
  BackendBuffer embed_;
  core::DType embed_dtype_ = core::DType::kF32;
  BackendBuffer final_norm_;
  std::unique_ptr<BackendLinear> lm_head_;
  Activations act_;
  MoeBlock moe_block_;
};

}  // namespace

std::unique_ptr<TransformerBase> make_canonical_model(const ModelConfig& config,
                                                      const TensorSource& store,
                                                      const ModelOptions& options,
                                                      std::shared_ptr<Backend> backend) {
  return std::make_unique<CanonicalModel>(config, store, options, std::move(backend));
}

}  // namespace detinfer::model
