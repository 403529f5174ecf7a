#include "model/weight_loader.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "core/check.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "model/gguf.h"

namespace detinfer::model {
namespace {

// The quantized GGUF types the canonical CPU backend reads: "Q8_0, Q4_0, ..., Q6_K".
std::string quantized_type_names() {
  std::string names;
  for (const kernels::QuantFormat f : kernels::kAllQuantFormats) {
    if (!names.empty()) names += ", ";
    for (const char* c = kernels::to_string(f); *c != '\0'; ++c)
      names += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  }
  return names;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The sparse MLP of layer l: the router and each expert's three projections, named as
// the published checkpoints name them (Qwen3-MoE: mlp.gate, mlp.experts.E.{gate,up,down}_proj;
// Mixtral: block_sparse_moe.gate, block_sparse_moe.experts.E.{w1,w3,w2}; Qwen2-MoE: as
// Qwen3-MoE, and mlp.shared_expert_gate, mlp.shared_expert.{gate,up,down}_proj).
void add_moe_weights(const ModelConfig& c, std::int64_t l, std::vector<WeightSpec>& w) {
  const std::int64_t h = c.hidden_size, inter = c.moe.intermediate_size;
  const bool mixtral = c.architecture == Architecture::kMixtral;
  const std::string p =
      "model.layers." + std::to_string(l) + (mixtral ? ".block_sparse_moe." : ".mlp.");
  w.push_back({p + "gate.weight", WeightKind::kRouter, l, {c.moe.num_experts, h}});
  const char* gate = mixtral ? "w1" : "gate_proj";
  const char* up = mixtral ? "w3" : "up_proj";
  const char* down = mixtral ? "w2" : "down_proj";
  for (std::int64_t e = 0; e < c.moe.num_experts; ++e) {
    const std::string q = p + "experts." + std::to_string(e) + ".";
    w.push_back({q + gate + ".weight", WeightKind::kExpertGate, l, {inter, h}, e});
    w.push_back({q + up + ".weight", WeightKind::kExpertUp, l, {inter, h}, e});
    w.push_back({q + down + ".weight", WeightKind::kExpertDown, l, {h, inter}, e});
  }
  const std::int64_t shared = c.moe.shared_intermediate_size;
  if (shared == 0) return;
  w.push_back({p + "shared_expert_gate.weight", WeightKind::kSharedGate, l, {1, h}});
  w.push_back(
      {p + "shared_expert.gate_proj.weight", WeightKind::kSharedExpertGate, l, {shared, h}});
  w.push_back({p + "shared_expert.up_proj.weight", WeightKind::kSharedExpertUp, l, {shared, h}});
  w.push_back(
      {p + "shared_expert.down_proj.weight", WeightKind::kSharedExpertDown, l, {h, shared}});
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
    if (c.norm_placement != NormPlacement::kPost) {
      add("input_layernorm.weight", WeightKind::kInputNorm, {h});
    }
    if (c.norm_placement != NormPlacement::kPre) {
      add("post_feedforward_layernorm.weight", WeightKind::kPostFfNorm, {h});
    }
    if (c.norm_placement == NormPlacement::kSandwich) {
      add("pre_feedforward_layernorm.weight", WeightKind::kPreFfNorm, {h});
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
    if (is_moe_layer(c, l)) {
      add_moe_weights(c, l, w);
    } else if (c.fused_projections) {
      add("mlp.gate_up_proj.weight", WeightKind::kGateUp, {2 * inter, h});
    } else {
      add("mlp.gate_proj.weight", WeightKind::kGate, {inter, h});
      add("mlp.up_proj.weight", WeightKind::kUp, {inter, h});
    }
    if (!is_moe_layer(c, l)) add("mlp.down_proj.weight", WeightKind::kDown, {h, inter});
  }
  std::sort(w.begin(), w.end(),
            [](const WeightSpec& a, const WeightSpec& b) { return a.name < b.name; });
  return w;
}

namespace {
// One row per quantized format: the ggml type that stores its blocks.
constexpr std::pair<kernels::QuantFormat, GgmlType> kGgmlTypes[] = {
    {kernels::QuantFormat::kQ8_0, GgmlType::kQ8_0}, {kernels::QuantFormat::kQ4_0, GgmlType::kQ4_0},
    {kernels::QuantFormat::kQ5_0, GgmlType::kQ5_0}, {kernels::QuantFormat::kQ4_1, GgmlType::kQ4_1},
    {kernels::QuantFormat::kQ5_1, GgmlType::kQ5_1}, {kernels::QuantFormat::kQ2_K, GgmlType::kQ2_K},
    {kernels::QuantFormat::kQ3_K, GgmlType::kQ3_K}, {kernels::QuantFormat::kQ4_K, GgmlType::kQ4_K},
    {kernels::QuantFormat::kQ5_K, GgmlType::kQ5_K}, {kernels::QuantFormat::kQ6_K, GgmlType::kQ6_K},
};
}  // namespace

bool is_norm_kind(WeightKind kind) {
  switch (kind) {
    case WeightKind::kFinalNorm:
    case WeightKind::kInputNorm:
    case WeightKind::kPostNorm:
    case WeightKind::kPostFfNorm:
    case WeightKind::kPreFfNorm:
    case WeightKind::kQNorm:
    case WeightKind::kKNorm:
      return true;
    default:
      return false;
  }
}

std::optional<kernels::QuantFormat> quant_format_of(const TensorFormat& format) {
  if (format.is_float) return std::nullopt;
  for (const auto& [q, g] : kGgmlTypes)
    if (static_cast<std::uint32_t>(g) == format.ggml_type) return q;
  return std::nullopt;
}

std::uint32_t ggml_type_of(kernels::QuantFormat format) {
  for (const auto& [q, g] : kGgmlTypes)
    if (q == format) return static_cast<std::uint32_t>(g);
  fail(ErrorCode::kInternal, "ggml_type_of: unknown quantized format ", static_cast<int>(format));
}

void WeightSink::take_encoded(const WeightSpec& spec, const TensorFormat& format, const void* data,
                              std::uint64_t bytes) {
  const std::optional<kernels::QuantFormat> q = quant_format_of(format);
  if (!q) {
    fail(ErrorCode::kUnsupported, "tensor '", spec.name, "': weight type ", format.name,
         " is not supported");
  }
  // Rows of whole blocks (the GGUF reader checked the byte count against the shape; this
  // keeps the sink's contract whatever the source).
  const std::int64_t k = spec.shape.back();
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < spec.shape.size(); ++d) rows *= spec.shape[d];
  const std::int64_t block = kernels::quant_format_info(*q).block_elems;
  if (k % block != 0 ||
      static_cast<std::uint64_t>(rows * kernels::quant_row_bytes(*q, k)) != bytes) {
    fail(ErrorCode::kCorrupt, "tensor '", spec.name, "' of type ", format.name, " has ", bytes,
         " bytes, which is not ", rows, " rows of ", k, " values in blocks of ", block);
  }
  take_quantized(spec, *q, data);
}

namespace {

// The tensors of `specs`, each present, of the expected shape and of a format the sink takes.
std::vector<const SourceTensor*> check_tensors(const std::vector<WeightSpec>& specs,
                                               const TensorSource& source, const WeightSink& sink) {
  std::vector<const SourceTensor*> refs;
  refs.reserve(specs.size());
  for (const auto& s : specs) {
    const SourceTensor* t = source.find(s);
    if (t == nullptr) {
      fail(ErrorCode::kNotFound, "tensor '", source.name_of(s), "' is missing from ",
           source.source());
    }
    if (t->shape != s.shape) {
      fail(ErrorCode::kCorrupt, "tensor '", t->name, "' in ", t->file->path(), " has shape ",
           shape_str(t->shape), " but ", source.config_name(), " implies ", shape_str(s.shape));
    }
    if (!sink.accepts(t->format)) {
      throw Error(ErrorCode::kUnsupported,
                  str_cat("tensor '", t->name, "' in ", t->file->path(), " has type ",
                          t->format.name, ", which is not supported (supported: F32, F16, BF16; ",
                          quantized_type_names(), " in canonical mode on the CPU)"),
                  t->name);
    }
    refs.push_back(t);
  }
  const std::size_t unused = source.count_unused(specs);
  if (unused > 0)
    logger().info("{}: {} tensors not used by the model are ignored", source.source(), unused);
  return refs;
}

// The bytes the sink gets: the mapping itself, or a copy in `buf` when the rows must be
// reordered or the data is not aligned to its element size (kernels want alignment).
const std::uint8_t* sink_bytes(const SourceTensor& t, std::vector<std::uint8_t>& buf) {
  const std::uint8_t* data = t.data();
  const std::size_t bytes = static_cast<std::size_t>(t.bytes);
  const std::size_t align = t.format.is_float ? core::dtype_size(t.format.dtype) : 8;
  if (t.row_order.empty() && reinterpret_cast<std::uintptr_t>(data) % align == 0) return data;
  buf.resize(bytes + 8);
  std::uint8_t* p = buf.data();
  p += (8 - reinterpret_cast<std::uintptr_t>(p) % 8) % 8;
  if (t.row_order.empty()) {
    std::memcpy(p, data, bytes);
  } else {
    const std::size_t rows = t.row_order.size();
    const std::size_t row_bytes = bytes / rows;
    for (std::size_t r = 0; r < rows; ++r) {
      std::memcpy(p + r * row_bytes, data + static_cast<std::size_t>(t.row_order[r]) * row_bytes,
                  row_bytes);
    }
  }
  return p;
}

}  // namespace

LoadedWeights stream_weights(const ModelConfig& config, const TensorSource& source,
                             WeightSink& sink) {
  const std::vector<WeightSpec> specs = required_weights(config);
  const std::vector<const SourceTensor*> refs = check_tensors(specs, source, sink);

  LoadedWeights out;
  Hasher h;
  h.update_field("detinfer-model-fingerprint-v1");
  h.update_field(canonical_config_text(config));
  const std::string extra = source.fingerprint_extra();
  if (!extra.empty()) h.update_field(extra);
  h.update_u64(specs.size());
  std::vector<std::uint8_t> buf;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const SourceTensor& t = *refs[i];
    if (specs[i].kind == WeightKind::kEmbed && t.format.is_float) out.embed_dtype = t.format.dtype;
    const std::size_t bytes = static_cast<std::size_t>(t.bytes);
    t.file->advise_sequential(t.file_offset, bytes);
    const std::uint8_t* data = t.data();
    const std::uint8_t* sink_data = sink_bytes(t, buf);
    WeightSpec marked;  // a copy only for the (few) norms a source stored as 1 + w
    const WeightSpec* spec = &specs[i];
    if (t.norm_plus_one_applied) {
      marked = specs[i];
      marked.norm_plus_one_applied = true;
      spec = &marked;
    }
    if (t.format.is_float) {
      sink.take(*spec, t.format.dtype, sink_data);
    } else {
      sink.take_encoded(*spec, t.format, sink_data, t.bytes);
    }
    // Hashed right after the sink read the bytes: the pages are resident and hot, so the
    // fingerprint costs only the hashing itself, not a second read of the file. The bytes
    // as stored (GGUF: before the rows are reordered).
    const auto t0 = std::chrono::steady_clock::now();
    h.update_field(t.fingerprint_name.empty() ? t.name : t.fingerprint_name);
    h.update_field(t.format.name);
    h.update_u64(t.shape.size());
    for (const std::int64_t d : t.shape) h.update_i64(d);
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

LoadedWeights stream_weights(const ModelConfig& config, const TensorStore& store,
                             WeightSink& sink) {
  const SafetensorsSource source(store, config);
  return stream_weights(config, source, sink);
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
