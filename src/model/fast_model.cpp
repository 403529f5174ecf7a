// The fast forward pass: the same transformer with libtorch ops (at::linear over
// OpenBLAS/MKL-DNN, at::softmax, ...). No reproducibility guarantee beyond libtorch's
// own; it exists so that users and benchmarks can compare against canonical mode on the
// same model. The only TU of the model that includes libtorch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>

#include "core/check.h"
#include "model/model_factories.h"
#include "model/transformer_base.h"

// OpenBLAS (libtorch's BLAS on Debian) runs its own thread pool, sized to the machine and
// independent of at::set_num_threads; weak so that a libtorch on another BLAS still links.
extern "C" void openblas_set_num_threads(int num_threads) __attribute__((weak));

namespace detinfer::model {
namespace {

struct Layer {
  at::Tensor input_norm, post_norm, post_ff_norm, q_norm, k_norm;
  at::Tensor q_bias, k_bias, v_bias;
  at::Tensor q, k, v, o, gate, up, down;
};

class FastModel final : public TransformerBase, private WeightSink {
 public:
  FastModel(const ModelConfig& config, const TensorSource& store, const ModelOptions& options)
      : TransformerBase(config, options), layers_(static_cast<std::size_t>(config.num_layers)) {
    if (config.architecture == Architecture::kGemma2 ||
        config.architecture == Architecture::kGemma3) {
      throw Error(ErrorCode::kUnsupported,
                  str_cat("fast mode does not implement ", to_string(config.architecture),
                          " (use canonical mode)"),
                  "mode");
    }
    // The matmuls (OpenBLAS) get the threads; libtorch's own OpenMP pool stays at one
    // thread, since two spinning pools on the same cores slow each other down several-fold
    // (docs/performance.md). Both settings are process-wide: the last fast model loaded wins.
    if (openblas_set_num_threads != nullptr) {
      openblas_set_num_threads(options.threads);
      at::set_num_threads(1);
    } else {
      at::set_num_threads(options.threads);
    }
    const LoadedWeights w = stream_weights(config_, store, *this);
    if (config_.tie_word_embeddings) lm_head_ = embed_;
    // An untied embedding table only serves row lookups; a tied one is the lm_head too.
    set_loaded(w, resident_,
               config_.tie_word_embeddings ? 0 : static_cast<std::int64_t>(embed_.numel() * 4));
  }

 private:
  // Where a layer's norm weight or bias goes.
  static at::Tensor* vector_slot(WeightKind kind, Layer& l) {
    switch (kind) {
      case WeightKind::kInputNorm:
        return &l.input_norm;
      case WeightKind::kPostNorm:
        return &l.post_norm;
      case WeightKind::kPostFfNorm:
        return &l.post_ff_norm;
      case WeightKind::kQNorm:
        return &l.q_norm;
      case WeightKind::kKNorm:
        return &l.k_norm;
      case WeightKind::kQBias:
        return &l.q_bias;
      case WeightKind::kKBias:
        return &l.k_bias;
      default:
        return &l.v_bias;
    }
  }

  void take(const WeightSpec& s, core::DType dtype, const void* data) override {
    // Weights are widened to f32 once; libtorch's CPU bf16/f16 matmuls are slow.
    at::Tensor t = at::empty(s.shape, at::kFloat);
    widen_to_f32(dtype, data, t.numel(), t.data_ptr<float>());
    if (s.kind != WeightKind::kLmHead || !config_.tie_word_embeddings) {
      resident_ += static_cast<std::int64_t>(t.numel() * 4);
    }
    Layer* l = s.layer >= 0 ? &layers_[static_cast<std::size_t>(s.layer)] : nullptr;
    switch (s.kind) {
      case WeightKind::kEmbed:
        embed_ = t;
        break;
      case WeightKind::kLmHead:
        lm_head_ = t;
        break;
      case WeightKind::kFinalNorm:
        final_norm_ = t;
        break;
      case WeightKind::kInputNorm:
      case WeightKind::kPostNorm:
      case WeightKind::kPostFfNorm:
      case WeightKind::kQNorm:
      case WeightKind::kKNorm:
      case WeightKind::kQBias:
      case WeightKind::kKBias:
      case WeightKind::kVBias:
        *vector_slot(s.kind, *l) = t;
        break;
      case WeightKind::kPreFfNorm:  // Gemma: refused by the constructor
        break;
      case WeightKind::kQ:
        l->q = t;
        break;
      case WeightKind::kK:
        l->k = t;
        break;
      case WeightKind::kV:
        l->v = t;
        break;
      case WeightKind::kO:
        l->o = t;
        break;
      case WeightKind::kGate:
        l->gate = t;
        break;
      case WeightKind::kUp:
        l->up = t;
        break;
      case WeightKind::kDown:
        l->down = t;
        break;
      case WeightKind::kQkv: {  // Phi-3: [q | k | v] rows (views of the one tensor)
        const std::int64_t qd = config_.num_heads * config_.head_dim;
        const std::int64_t kd = config_.num_kv_heads * config_.head_dim;
        l->q = t.narrow(0, 0, qd);
        l->k = t.narrow(0, qd, kd);
        l->v = t.narrow(0, qd + kd, kd);
        break;
      }
      case WeightKind::kGateUp:  // Phi-3: [gate | up] rows
        l->gate = t.narrow(0, 0, config_.intermediate_size);
        l->up = t.narrow(0, config_.intermediate_size, config_.intermediate_size);
        break;
      default:  // the mixture-of-experts kinds: refused before loading (model_load.cpp)
        fail(ErrorCode::kUnsupported, "fast mode does not implement mixture of experts");
    }
  }

  // y = x W^T (+ b). One row goes through at::mv (BLAS gemv: reads W once); addmm with
  // M = 1 makes OpenBLAS pack the whole of W first, which doubles decode's memory traffic.
  static at::Tensor linear(const at::Tensor& x, const at::Tensor& w,
                           const at::Tensor& b = at::Tensor()) {
    if (x.size(0) != 1) return at::linear(x, w, b);
    at::Tensor y = at::mv(w, x[0]);
    if (b.defined()) y = y + b;
    return y.unsqueeze(0);
  }

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + config_.rms_norm_eps) * w;
  }

  // x: [rows, heads, hd]; cos/sin: [rows, 1, rd/2]: the first rd dims of each head rotate.
  static at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    const std::int64_t half = cos.size(2), rd = 2 * half;
    const at::Tensor x1 = x.narrow(2, 0, half);
    const at::Tensor x2 = x.narrow(2, half, half);
    at::Tensor rotated = at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 2);
    if (rd == x.size(2)) return rotated;
    return at::cat({rotated, x.narrow(2, rd, x.size(2) - rd)}, 2);
  }

  // Writes the step's K and V into layer li's pool and attends every sequence's rows
  // (causal, GQA); [rows, num_heads * head_dim].
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const BatchPlan& plan, KvCachePool& kv, std::int64_t li) const {
    const ModelConfig& c = config_;
    const std::int64_t m = plan.rows, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
    const std::int64_t kd = nkv * hd;
    const std::int64_t pool_tokens = kv.capacity() * kv.block_size();
    // f32 only: Model::load rejects another kv_dtype in fast mode, forward() a pool of one.
    float* kp = static_cast<float*>(kv.k_pool(li));
    float* vp = static_cast<float*>(kv.v_pool(li));
    for (std::int64_t r = 0; r < m; ++r) {
      const std::int64_t slot = plan.kv_slots[static_cast<std::size_t>(r)];
      std::memcpy(kp + slot * kd, k.data_ptr<float>() + r * kd, static_cast<std::size_t>(kd) * 4);
      std::memcpy(vp + slot * kd, v.data_ptr<float>() + r * kd, static_cast<std::size_t>(kd) * 4);
    }
    const at::Tensor kall = at::from_blob(kp, {pool_tokens, nkv, hd}, at::kFloat);
    const at::Tensor vall = at::from_blob(vp, {pool_tokens, nkv, hd}, at::kFloat);
    std::vector<at::Tensor> outs;
    for (const BatchPlan::Seq& s : plan.seqs) {
      const std::int64_t keys = s.start_pos + s.rows;
      // Full causal attention equals a sliding window while every key is inside it.
      if (layer_is_sliding(c, li) && keys > c.sliding_window) {
        throw Error(ErrorCode::kUnsupported,
                    str_cat("fast mode: ", keys, " keys exceed the sliding window ",
                            c.sliding_window, " (windowed attention needs canonical mode)"),
                    "sliding_window");
      }
      at::Tensor slots = at::empty({keys}, at::kLong);
      for (std::int64_t t = 0; t < keys; ++t) {
        slots.data_ptr<std::int64_t>()[t] =
            s.block_table[t / kv.block_size()] * kv.block_size() + t % kv.block_size();
      }
      // [nh, keys, hd] after repeating each kv head for its query group.
      const at::Tensor ks =
          kall.index_select(0, slots).repeat_interleave(nh / nkv, 1).transpose(0, 1);
      const at::Tensor vs =
          vall.index_select(0, slots).repeat_interleave(nh / nkv, 1).transpose(0, 1);
      const at::Tensor qs = q.narrow(0, s.row_begin, s.rows).transpose(0, 1);  // [nh, rows, hd]
      at::Tensor scores = at::matmul(qs, ks.transpose(1, 2)) * attention_scale_;
      // Row r (position start_pos + r) sees keys [0, start_pos + r].
      const at::Tensor key_idx = at::arange(keys, at::kLong).view({1, keys});
      const at::Tensor row_pos = at::arange(s.start_pos, keys, at::kLong).view({s.rows, 1});
      scores = scores.masked_fill(key_idx.gt(row_pos), -std::numeric_limits<float>::infinity());
      const at::Tensor p = at::softmax(scores, -1);
      outs.push_back(at::matmul(p, vs).transpose(0, 1).reshape({s.rows, nh * hd}));
    }
    return at::cat(outs, 0);
  }

  void run(const BatchPlan& plan, KvCachePool& kv, std::vector<float>& logits) override {
    at::NoGradGuard no_grad;
    const ModelConfig& c = config_;
    const std::int64_t m = plan.rows, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
    const std::int64_t half = rope_dims(c) / 2;
    const at::Tensor tokens =
        at::from_blob(const_cast<std::int32_t*>(plan.tokens.data()), {m}, at::kInt).to(at::kLong);
    at::Tensor cos = at::empty({m, 1, half}, at::kFloat);
    at::Tensor sin = at::empty({m, 1, half}, at::kFloat);
    for (std::int64_t r = 0; r < m; ++r) {
      const std::int64_t pos = plan.positions[static_cast<std::size_t>(r)];
      std::memcpy(cos.data_ptr<float>() + r * half, rope_.cos(pos),
                  static_cast<std::size_t>(half) * 4);
      std::memcpy(sin.data_ptr<float>() + r * half, rope_.sin(pos),
                  static_cast<std::size_t>(half) * 4);
    }
    at::Tensor x = embed_.index_select(0, tokens);
    for (std::int64_t li = 0; li < c.num_layers; ++li) {
      const Layer& l = layers_[static_cast<std::size_t>(li)];
      const bool post = c.norm_placement == NormPlacement::kPost;
      const at::Tensor hn = post ? x : rms_norm(x, l.input_norm);
      at::Tensor q = linear(hn, l.q, l.q_bias);
      at::Tensor k = linear(hn, l.k, l.k_bias);
      const at::Tensor v = linear(hn, l.v, l.v_bias).contiguous();
      if (c.qk_norm == QkNorm::kFullWidth) {
        q = rms_norm(q, l.q_norm);
        k = rms_norm(k, l.k_norm);
      }
      q = q.view({m, nh, hd});
      k = k.view({m, nkv, hd});
      if (c.qk_norm == QkNorm::kPerHead) {
        q = rms_norm(q, l.q_norm);
        k = rms_norm(k, l.k_norm);
      }
      q = rope(q, cos, sin).contiguous();
      k = rope(k, cos, sin).contiguous();
      const at::Tensor attn = attend(q, k, v, plan, kv, li);
      if (post) {  // OLMo 2: norms on the sublayer outputs
        x = x + rms_norm(linear(attn, l.o), l.post_norm);
        x = x +
            rms_norm(linear(at::silu(linear(x, l.gate)) * linear(x, l.up), l.down), l.post_ff_norm);
        continue;
      }
      x = x + linear(attn, l.o);
      const at::Tensor h2 = rms_norm(x, l.post_norm);
      x = x + linear(at::silu(linear(h2, l.gate)) * linear(h2, l.up), l.down);
    }
    at::Tensor rows = at::empty({static_cast<std::int64_t>(plan.logit_rows.size())}, at::kLong);
    std::memcpy(rows.data_ptr<std::int64_t>(), plan.logit_rows.data(), plan.logit_rows.size() * 8);
    const at::Tensor out =
        linear(rms_norm(x.index_select(0, rows), final_norm_), lm_head_).contiguous();
    const std::size_t base = logits.size();
    logits.resize(base + static_cast<std::size_t>(out.numel()));
    std::memcpy(logits.data() + base, out.data_ptr<float>(),
                static_cast<std::size_t>(out.numel()) * 4);
  }

  std::vector<Layer> layers_;
  at::Tensor embed_, lm_head_, final_norm_;
  std::int64_t resident_ = 0;
};

}  // namespace

std::unique_ptr<TransformerBase> make_fast_model(const ModelConfig& config,
                                                 const TensorSource& store,
                                                 const ModelOptions& options) {
  return std::make_unique<FastModel>(config, store, options);
}

}  // namespace detinfer::model
