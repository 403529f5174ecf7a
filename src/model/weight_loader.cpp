#include "model/weight_loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "kernels/kernels.h"

namespace detinfer::model {
namespace {

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::vector<WeightSpec> required_weights(const ModelConfig& c) {
  const std::int64_t h = c.hidden_size;
  const std::int64_t q = c.num_heads * c.head_dim;
  const std::int64_t kv = c.num_kv_heads * c.head_dim;
  const std::int64_t inter = c.intermediate_size;
  std::vector<WeightSpec> w;
  w.push_back({"model.embed_tokens.weight", WeightKind::kEmbed, -1, {c.vocab_size, h}});
  w.push_back({"model.norm.weight", WeightKind::kFinalNorm, -1, {h}});
  if (!c.tie_word_embeddings)
    w.push_back({"lm_head.weight", WeightKind::kLmHead, -1, {c.vocab_size, h}});
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto add = [&](const std::string& n, WeightKind k, std::vector<std::int64_t> shape) {
      w.push_back({p + n, k, l, std::move(shape)});
    };
    if (c.norm_placement == NormPlacement::kPre) {
      add("input_layernorm.weight", WeightKind::kInputNorm, {h});
    } else {
      add("post_feedforward_layernorm.weight", WeightKind::kPostFfNorm, {h});
    }
    add("post_attention_layernorm.weight", WeightKind::kPostNorm, {h});
    if (c.fused_projections) {
      add("self_attn.qkv_proj.weight", WeightKind::kQkv, {q + 2 * kv, h});
    } else {
      add("self_attn.q_proj.weight", WeightKind::kQ, {q, h});
      add("self_attn.k_proj.weight", WeightKind::kK, {kv, h});
      add("self_attn.v_proj.weight", WeightKind::kV, {kv, h});
    }
    add("self_attn.o_proj.weight", WeightKind::kO, {h, q});
    if (c.attention_bias) {
      add("self_attn.q_proj.bias", WeightKind::kQBias, {q});
      add("self_attn.k_proj.bias", WeightKind::kKBias, {kv});
      add("self_attn.v_proj.bias", WeightKind::kVBias, {kv});
    }
    if (c.qk_norm != QkNorm::kNone) {
      const bool full = c.qk_norm == QkNorm::kFullWidth;
      add("self_attn.q_norm.weight", WeightKind::kQNorm, {full ? q : c.head_dim});
      add("self_attn.k_norm.weight", WeightKind::kKNorm, {full ? kv : c.head_dim});
    }
    if (c.fused_projections) {
      add("mlp.gate_up_proj.weight", WeightKind::kGateUp, {2 * inter, h});
    } else {
      add("mlp.gate_proj.weight", WeightKind::kGate, {inter, h});
      add("mlp.up_proj.weight", WeightKind::kUp, {inter, h});
    }
    add("mlp.down_proj.weight", WeightKind::kDown, {h, inter});
  }
  std::sort(w.begin(), w.end(),
            [](const WeightSpec& a, const WeightSpec& b) { return a.name < b.name; });
  return w;
}

LoadedWeights stream_weights(const ModelConfig& config, const TensorStore& store,
                             WeightSink& sink) {
  const std::vector<WeightSpec> specs = required_weights(config);
  std::vector<const TensorRef*> refs;
  refs.reserve(specs.size());
  for (const auto& s : specs) {
    const TensorRef& t = store.get(s.name);
    if (t.info->shape != s.shape) {
      fail(ErrorCode::kCorrupt, "tensor '", s.name, "' in ", t.file->path(), " has shape ",
           shape_str(t.info->shape), " but config.json implies ", shape_str(s.shape));
    }
    refs.push_back(&t);
  }
  std::set<std::string> wanted;
  for (const auto& sp : specs) wanted.insert(sp.name);
  std::size_t unused = 0;
  for (const auto& entry : store.tensors()) unused += wanted.count(entry.first) == 0 ? 1 : 0;
  if (unused > 0)
    logger().info("{}: {} tensors not used by the model are ignored", store.source(), unused);

  LoadedWeights out;
  Hasher h;
  h.update_field("detinfer-model-fingerprint-v1");
  h.update_field(canonical_config_text(config));
  h.update_u64(specs.size());
  std::vector<std::uint8_t> aligned;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorRef& t = *refs[i];
    const TensorInfo& info = *t.info;
    if (specs[i].kind == WeightKind::kEmbed) out.embed_dtype = info.dtype;
    const std::size_t bytes = static_cast<std::size_t>(info.size());
    t.file->advise_sequential(t.file_offset, bytes);
    const std::uint8_t* data = t.data();
    // The file may place a tensor at any byte offset; kernels want element alignment.
    const std::uint8_t* sink_data = data;
    if (reinterpret_cast<std::uintptr_t>(data) % core::dtype_size(info.dtype) != 0) {
      aligned.resize(bytes + 8);
      std::uint8_t* p = aligned.data();
      p += (8 - reinterpret_cast<std::uintptr_t>(p) % 8) % 8;
      std::memcpy(p, data, bytes);
      sink_data = p;
    }
    sink.take(specs[i], info.dtype, sink_data);
    // Hashed right after the sink read the bytes: the pages are resident and hot, so the
    // fingerprint costs only the hashing itself, not a second read of the file.
    const auto t0 = std::chrono::steady_clock::now();
    h.update_field(info.name);
    h.update_field(core::safetensors_name(info.dtype));
    h.update_u64(info.shape.size());
    for (const std::int64_t d : info.shape) h.update_i64(d);
    h.update_u64(bytes);
    h.update(data, bytes);
    out.fingerprint_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The sink keeps its own copy: drop the mapped pages so they do not add to peak RSS.
    t.file->release(t.file_offset, bytes);
    out.weight_bytes += static_cast<std::int64_t>(bytes);
  }
  out.fingerprint = h.digest128();
  return out;
}

void WeightSink::take_quantized(const WeightSpec& spec, kernels::QuantFormat format,
                                const void* /*blocks*/) {
  throw Error(ErrorCode::kUnsupported,
              str_cat("tensor ", spec.name, " is quantized (", kernels::to_string(format),
                      "); this model kind takes only f32/bf16/f16 weights"),
              spec.name);
}

void widen_to_f32(core::DType dtype, const void* src, std::int64_t n, float* dst) {
  switch (dtype) {
    case core::DType::kF32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
      return;
    case core::DType::kBF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = kernels::bf16_to_f32(s[i]);
      return;
    }
    case core::DType::kF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = kernels::f16_to_f32(s[i]);
      return;
    }
  }
}

}  // namespace detinfer::model
