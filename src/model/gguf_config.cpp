// GGUF metadata -> ModelConfig (gguf_model.h; docs/gguf.md, "Models"). The keys are the
// ones llama.cpp's converter writes: {arch}.context_length, .embedding_length, ...
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "model/gguf_internal.h"
#include "model/gguf_model.h"
#include "model/moe_config.h"
#include "model/rope_table.h"

namespace detinfer::model {
namespace {

using gguf_internal::bad;
using gguf_internal::kMaxDim;
using gguf_internal::Meta;

Architecture gguf_architecture(const std::string& name, const std::string& where) {
  // GGUF files of Mistral models say "llama": the same computation (a sliding window, if
  // any, is not in the metadata); so do Mixtral's (llama with {arch}.expert_count > 0).
  static const std::pair<const char*, Architecture> kNames[] = {
      {"llama", Architecture::kLlama},       {"qwen2", Architecture::kQwen2},
      {"qwen3", Architecture::kQwen3},       {"olmo2", Architecture::kOlmo2},
      {"phi3", Architecture::kPhi3},         {"gemma2", Architecture::kGemma2},
      {"gemma3", Architecture::kGemma3},     {"qwen3moe", Architecture::kQwen3Moe},
      {"qwen2moe", Architecture::kQwen2Moe},
  };
  for (const auto& [n, a] : kNames) {
    if (name == n) return a;
  }
  bad(ErrorCode::kUnsupported, where, "general.architecture",
      str_cat("= '", name,
              "' is not supported (supported: llama, qwen2, qwen3, olmo2, phi3, gemma2, gemma3, "
              "qwen3moe, qwen2moe)"));
}

void read_heads(const Meta& m, ModelConfig& c) {
  c.num_heads = m.dim("attention.head_count", 1, 4096);
  c.num_kv_heads = m.dim_or("attention.head_count_kv", 1, 4096, c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    bad(ErrorCode::kCorrupt, m.where(), m.key("attention.head_count_kv"),
        str_cat("= ", c.num_kv_heads, " does not divide attention.head_count ", c.num_heads));
  }
  const std::int64_t key_len = m.dim_or("attention.key_length", 2, 4096, 0);
  if (key_len != 0) {
    c.head_dim = key_len;
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      bad(ErrorCode::kCorrupt, m.where(), m.key("embedding_length"),
          str_cat("= ", c.hidden_size, " is not a multiple of attention.head_count ", c.num_heads,
                  " and attention.key_length is absent"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  const std::int64_t value_len = m.dim_or("attention.value_length", 2, 4096, c.head_dim);
  if (value_len != c.head_dim) {
    bad(ErrorCode::kUnsupported, m.where(), m.key("attention.value_length"),
        str_cat("= ", value_len, " differs from the key_length (head_dim) ", c.head_dim));
  }
  if (c.head_dim % 2 != 0) {
    bad(ErrorCode::kCorrupt, m.where(), m.key("attention.key_length"),
        str_cat("head_dim ", c.head_dim, " is odd"));
  }
}

// {arch}.rope.dimension_count: all of head_dim, or (phi3 only) the leading dimensions
// partial rotary turns (llama.cpp writes int(partial_rotary_factor * hidden) / heads).
void read_rotary_dims(const Meta& m, ModelConfig& c) {
  const std::int64_t rot = m.dim_or("rope.dimension_count", 1, 4096, c.head_dim);
  if (rot == c.head_dim) return;
  if (c.architecture != Architecture::kPhi3) {
    bad(ErrorCode::kUnsupported, m.where(), m.key("rope.dimension_count"),
        str_cat("= ", rot, " differs from head_dim ", c.head_dim,
                " (partial rotary is not supported for this architecture)"));
  }
  if (rot > c.head_dim || rot < 2 || rot % 2 != 0) {
    bad(ErrorCode::kCorrupt, m.where(), m.key("rope.dimension_count"),
        str_cat("= ", rot, " is not an even number of rotated dimensions in [2, head_dim ",
                c.head_dim, "]"));
  }
  c.partial_rotary_dim = rot;
}

// One longrope factor list: an F32 tensor of `n` (rotated dimension pairs per head)
// finite values in (0, 1e6], as rope_config.cpp accepts them from config.json.
std::vector<double> rope_factors(const Meta& m, const GgufModel& g, const std::string& name,
                                 std::int64_t n) {
  const GgufTensor* t = g.find(name).first;
  auto fail_tensor = [&](ErrorCode code, const std::string& what) {
    throw Error(code, str_cat(m.where(), ": tensor '", name, "' ", what), name);
  };
  if (t->type != static_cast<std::uint32_t>(GgmlType::kF32)) {
    fail_tensor(ErrorCode::kUnsupported,
                str_cat("has type ", ggml_type_name(t->type), " (rope factors must be F32)"));
  }
  if (t->dims.size() != 1 || t->dims[0] != static_cast<std::uint64_t>(n)) {
    std::string shape;  // ggml order, as stored
    for (std::size_t i = 0; i < t->dims.size(); ++i) shape += str_cat(i ? ", " : "", t->dims[i]);
    fail_tensor(ErrorCode::kCorrupt,
                str_cat("has shape [", shape, "], expected [", n, "] (rope.dimension_count / 2)"));
  }
  const std::uint8_t* p = g.data(name);
  std::vector<double> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < out.size(); ++i) {
    float v = 0;
    std::memcpy(&v, p + i * sizeof v, sizeof v);
    if (!(v > 0.0f && v <= 1e6f)) {
      fail_tensor(ErrorCode::kCorrupt, str_cat("[", i, "] = ", v, " is not in (0, 1e6]"));
    }
    out[i] = v;
  }
  return out;
}

// phi3's longrope (docs/gguf.md): present when the file holds rope_factors_long.weight and
// rope_factors_short.weight; rope.scaling.original_context_length is then required, the
// factor is context_length / that (what transformers derives without a config factor), and
// rope.scaling.attn_factor is kept only when it differs (at f32) from the derived one.
void read_longrope(const Meta& m, const GgufModel& g, ModelConfig& c) {
  const char* kLong = "rope_factors_long.weight";
  const char* kShort = "rope_factors_short.weight";
  const bool has_long = g.find(kLong).first != nullptr, has_short = g.find(kShort).first != nullptr;
  if (!has_long && !has_short) return;
  if (!has_long || !has_short) {
    const char* missing = has_long ? kShort : kLong;
    throw Error(ErrorCode::kNotFound,
                str_cat(m.where(), ": tensor '", missing, "' is missing (the file holds '",
                        has_long ? kLong : kShort, "': longrope needs both)"),
                missing);
  }
  RopeScaling& s = c.rope_scaling;
  s.type = "longrope";
  s.original_max_position_embeddings =
      m.dim("rope.scaling.original_context_length", 1, kMaxDim * 16);
  s.factor = static_cast<double>(c.max_position_embeddings) /
             static_cast<double>(s.original_max_position_embeddings);
  s.short_factor = rope_factors(m, g, kShort, rope_dims(c) / 2);
  s.long_factor = rope_factors(m, g, kLong, rope_dims(c) / 2);
  if (const auto a = m.number_opt("rope.scaling.attn_factor", 1e-6, 1e6)) {
    if (static_cast<float>(RopeTable(c).attention_factor()) != static_cast<float>(*a)) {
      s.attention_factor = *a;
    }
  }
  // detinfer's canonical longrope rule (rope_config.cpp): short factors, context limited to
  // the original length.
  c.max_position_embeddings =
      std::min(c.max_position_embeddings, s.original_max_position_embeddings);
}

void read_rope(const Meta& m, const GgufModel& g, ModelConfig& c) {
  c.rope_theta = m.number_opt("rope.freq_base", 1.0, 1e12).value_or(10000.0);
  read_rotary_dims(m, c);
  if (g.find("rope_freqs.weight").first != nullptr) {
    throw Error(ErrorCode::kUnsupported,
                m.where() +
                    ": tensor 'rope_freqs.weight' (per-dimension RoPE factors, as "
                    "llama3 rope scaling is stored) is not supported",
                "rope_freqs.weight");
  }
  std::string type = m.string_opt("rope.scaling.type").value_or("none");
  std::optional<double> factor = m.number_opt("rope.scaling.factor", 1.0, 1024.0);
  if (const auto legacy = m.number_opt("rope.scale_linear", 1.0, 1024.0)) {
    if (type == "none") type = "linear";
    factor = legacy;
  }
  if (c.architecture == Architecture::kPhi3) {
    // Phi3ForCausalLM knows only default and longrope (from the rope_factors tensors).
    if (type != "none") {
      bad(ErrorCode::kUnsupported, m.where(), m.key("rope.scaling.type"),
          str_cat("= '", type,
                  "' is not supported for phi3 (longrope comes from the "
                  "rope_factors_long/short tensors)"));
    }
    read_longrope(m, g, c);
    return;
  }
  if (type == "none" || (type == "linear" && factor && *factor == 1.0)) return;
  if (type != "linear") {
    bad(ErrorCode::kUnsupported, m.where(), m.key("rope.scaling.type"),
        str_cat("= '", type, "' is not supported (none, linear)"));
  }
  if (!factor) m.number("rope.scaling.factor", 1.0, 1024.0);  // kNotFound naming the key
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = *factor;
}

// {arch}.attention.sliding_window: phi3 writes it always (0 = none) and, like config.json's,
// every layer is windowed (model_config.cpp); OLMo 3 files (olmo2 with a window and a
// per-layer pattern) are refused.
void read_sliding_window(const Meta& m, ModelConfig& c) {
  if (c.architecture != Architecture::kPhi3 && c.architecture != Architecture::kOlmo2) return;
  const std::int64_t window = m.dim_or("attention.sliding_window", 0, kMaxDim * 16, 0);
  if (window == 0) return;
  if (c.architecture == Architecture::kOlmo2) {
    bad(ErrorCode::kUnsupported, m.where(), m.key("attention.sliding_window"),
        str_cat("= ", window, ": sliding-window layers (OLMo 3) are not supported"));
  }
  c.sliding_window = window;
  c.sliding_layers.assign(static_cast<std::size_t>(c.num_layers), 1);  // every layer
}

// The vocabulary: token_embd.weight's rows; {arch}.vocab_size and the tokenizer's token
// list, where present, must agree.
void read_vocab(const Meta& m, const GgufModel& g, ModelConfig& c) {
  const GgufFile& f = g.metadata();
  const GgufTensor* embd = g.find("token_embd.weight").first;
  if (embd == nullptr) {
    throw Error(ErrorCode::kNotFound, m.where() + ": tensor 'token_embd.weight' is missing",
                "token_embd.weight");
  }
  if (embd->dims.size() != 2 || embd->dims[1] > static_cast<std::uint64_t>(1) << 24) {
    throw Error(ErrorCode::kCorrupt,
                m.where() + ": tensor 'token_embd.weight' is not a [vocab, hidden] matrix",
                "token_embd.weight");
  }
  c.vocab_size = static_cast<std::int64_t>(embd->dims[1]);
  const std::int64_t meta_vocab = m.dim_or("vocab_size", 1, std::int64_t{1} << 24, c.vocab_size);
  if (meta_vocab != c.vocab_size) {
    bad(ErrorCode::kCorrupt, m.where(), m.key("vocab_size"),
        str_cat("= ", meta_vocab, " but token_embd.weight has ", c.vocab_size, " rows"));
  }
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) {
    if (tokens->type != GgufType::kArray ||
        tokens->array_size() != static_cast<std::size_t>(c.vocab_size)) {
      bad(ErrorCode::kCorrupt, m.where(), "tokenizer.ggml.tokens",
          str_cat("has ", tokens->array_size(), " tokens but token_embd.weight has ", c.vocab_size,
                  " rows"));
    }
  }
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                        "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const auto id = m.guarded([&] { return f.find_uint(k); });
    if (!id) continue;
    if (*id >= static_cast<std::uint64_t>(c.vocab_size)) {
      bad(ErrorCode::kCorrupt, m.where(), k, str_cat("= ", *id, " >= vocab size ", c.vocab_size));
    }
    auto& ids = k == std::string("tokenizer.ggml.bos_token_id") ? c.bos_token_ids : c.eos_token_ids;
    const auto v = static_cast<std::int32_t>(*id);
    if (std::find(ids.begin(), ids.end(), v) == ids.end()) ids.push_back(v);
  }
}

}  // namespace

ModelConfig gguf_model_config(const GgufModel& g) {
  const GgufFile& f = g.metadata();
  const std::string& where = g.where();
  const std::string arch_name =
      Meta(f, where, "general").guarded([&] { return f.get_string("general.architecture"); });
  ModelConfig c;
  c.architecture = gguf_architecture(arch_name, where);
  const Meta m(f, where, arch_name);
  // llama files with experts are Mixtral's; the dense architectures take no experts.
  const bool experts = m.dim_or("expert_count", 0, std::int64_t{1} << 20, 0) > 0;
  if (experts && c.architecture == Architecture::kLlama) c.architecture = Architecture::kMixtral;
  if (experts && !is_moe_architecture(c.architecture)) {
    bad(ErrorCode::kUnsupported, where, m.key("expert_count"),
        str_cat("> 0: ", arch_name, " files with experts are not supported"));
  }
  c.max_position_embeddings = m.dim("context_length", 1, kMaxDim * 16);
  c.hidden_size = m.dim("embedding_length", 1, kMaxDim);
  c.num_layers = m.dim("block_count", 1, 1024);
  c.intermediate_size = m.dim("feed_forward_length", 1, kMaxDim);
  read_heads(m, c);
  c.rms_norm_eps = static_cast<float>(m.number("attention.layer_norm_rms_epsilon", 0.0, 1.0));
  read_rope(m, g, c);
  read_sliding_window(m, c);
  read_vocab(m, g, c);
  c.tie_word_embeddings = g.find("output.weight").first == nullptr;
  if (c.architecture == Architecture::kQwen3) c.qk_norm = QkNorm::kPerHead;
  if (c.architecture == Architecture::kOlmo2) {  // q/k norms over the whole projection
    c.qk_norm = QkNorm::kFullWidth;
    c.norm_placement = NormPlacement::kPost;
  }
  c.fused_projections = c.architecture == Architecture::kPhi3;
  const Architecture a = c.architecture;
  if (a == Architecture::kQwen3Moe) c.qk_norm = QkNorm::kPerHead;
  c.attention_bias = a == Architecture::kQwen2 || a == Architecture::kQwen2Moe;
  gguf_internal::read_gemma_metadata(m, c);
  gguf_internal::read_moe_metadata(m, g, c);
  return c;
}

}  // namespace detinfer::model
