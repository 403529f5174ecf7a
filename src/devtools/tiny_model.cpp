// detinfer::devtools::make_tiny_model: a deterministic random model in the Hugging Face layout.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "detinfer/philox.h"
#include "devtools/model_tools.h"
#include "devtools/safetensors_writer.h"
#include "devtools/tiny_tokenizer.h"
#include "model/weight_loader.h"

namespace detinfer::devtools {
namespace {

constexpr std::int64_t kMinTokenizerVocab = 259;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorCode::kNotFound, "cannot create ", path);
  out << text;
  if (!out) fail(ErrorCode::kUnavailable, "write to ", path, " failed");
}

void make_dirs(const std::string& dir) {
  std::string cur;
  for (std::size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fail(ErrorCode::kNotFound, "cannot create directory ", dir);
  }
}

bool is_moe(TinyArch a) {
  return a == TinyArch::kQwen3Moe || a == TinyArch::kMixtral || a == TinyArch::kQwen2Moe;
}

// The MoE options are checked for MoE architectures only (written to config.json as given
// otherwise, so that hostile-config tests can start from any value the loader refuses).
void check_moe_options(const TinyModelOptions& o) {
  if (!is_moe(o.arch)) {
    if (o.fused_experts != FusedExperts::kNone)
      fail(ErrorCode::kInvalidArgument, "tiny model: fused experts need a MoE architecture");
    return;
  }
  auto in = [](const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi) {
      fail(ErrorCode::kInvalidArgument, "tiny model option ", name, " = ", v, " is outside [", lo,
           ", ", hi, "]");
    }
  };
  in("num_experts", o.num_experts, 1, 4096);
  in("experts_per_tok", o.experts_per_tok, 1, o.num_experts);
  in("moe_intermediate", o.moe_intermediate, 1, 1 << 17);
  for (const std::int64_t l : o.mlp_only_layers) in("mlp_only_layers", l, 0, o.layers - 1);
  in("shared_expert_intermediate", o.shared_expert_intermediate, 1, 1 << 17);
  if (o.fused_experts != FusedExperts::kNone && o.shards != 1) {
    fail(ErrorCode::kInvalidArgument, "tiny model: fused experts are written to one shard");
  }
}

void check_options(const TinyModelOptions& o) {
  auto in = [](const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi) {
      fail(ErrorCode::kInvalidArgument, "tiny model option ", name, " = ", v, " is outside [", lo,
           ", ", hi, "]");
    }
  };
  in("hidden", o.hidden, 2, 1 << 16);
  in("intermediate", o.intermediate, 1, 1 << 17);
  in("layers", o.layers, 1, 256);
  in("heads", o.heads, 1, 1024);
  in("kv_heads", o.kv_heads, 1, o.heads);
  in("head_dim", o.head_dim, 0, 4096);
  in("vocab", o.vocab, 2, 1 << 22);
  in("max_positions", o.max_positions, 1, 1 << 22);
  in("sliding_window", o.sliding_window, 0, 1 << 22);
  in("shards", o.shards, 1, 99);
  if (o.heads % o.kv_heads != 0)
    fail(ErrorCode::kInvalidArgument, "heads must be a multiple of kv_heads");
  if (o.head_dim == 0 && o.hidden % o.heads != 0) {
    fail(ErrorCode::kInvalidArgument, "hidden must be a multiple of heads (or set head_dim)");
  }
  const std::int64_t hd = o.head_dim != 0 ? o.head_dim : o.hidden / o.heads;
  if (hd % 2 != 0) fail(ErrorCode::kInvalidArgument, "head_dim ", hd, " must be even");
  if (o.out_dir.empty()) fail(ErrorCode::kInvalidArgument, "tiny model: out_dir is empty");
  if (!(o.partial_rotary_factor > 0.0 && o.partial_rotary_factor <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "tiny model: partial_rotary_factor must be in (0, 1]");
  }
  if (o.partial_rotary_factor != 1.0 && o.arch != TinyArch::kPhi3) {
    fail(ErrorCode::kInvalidArgument, "tiny model: partial_rotary_factor is for phi3 only");
  }
  check_moe_options(o);
  if (!(o.rms_norm_eps > 0.0 && o.rope_theta > 1.0)) {
    fail(ErrorCode::kInvalidArgument, "tiny model: rms_norm_eps and rope_theta must be positive");
  }
}

const char* arch_class(TinyArch a) {
  switch (a) {
    case TinyArch::kLlama:
      return "LlamaForCausalLM";
    case TinyArch::kMistral:
      return "MistralForCausalLM";
    case TinyArch::kQwen2:
      return "Qwen2ForCausalLM";
    case TinyArch::kQwen3:
      return "Qwen3ForCausalLM";
    case TinyArch::kOlmo2:
      return "Olmo2ForCausalLM";
    case TinyArch::kPhi3:
      return "Phi3ForCausalLM";
    case TinyArch::kGemma2:
      return "Gemma2ForCausalLM";
    case TinyArch::kGemma3:
      return "Gemma3ForCausalLM";
    case TinyArch::kQwen3Moe:
      return "Qwen3MoeForCausalLM";
    case TinyArch::kMixtral:
      return "MixtralForCausalLM";
    case TinyArch::kQwen2Moe:
      return "Qwen2MoeForCausalLM";
  }
  return "?";
}

const char* model_type(TinyArch a) {
  switch (a) {
    case TinyArch::kLlama:
      return "llama";
    case TinyArch::kMistral:
      return "mistral";
    case TinyArch::kQwen2:
      return "qwen2";
    case TinyArch::kQwen3:
      return "qwen3";
    case TinyArch::kOlmo2:
      return "olmo2";
    case TinyArch::kPhi3:
      return "phi3";
    case TinyArch::kGemma2:
      return "gemma2";
    case TinyArch::kGemma3:
      return "gemma3_text";
    case TinyArch::kQwen3Moe:
      return "qwen3_moe";
    case TinyArch::kMixtral:
      return "mixtral";
    case TinyArch::kQwen2Moe:
      return "qwen2_moe";
  }
  return "?";
}

bool is_gemma(TinyArch a) { return a == TinyArch::kGemma2 || a == TinyArch::kGemma3; }

// Gemma2Config / Gemma3TextConfig fields (hidden_activation, soft-caps, windows).
void add_gemma_fields(const TinyModelOptions& o, std::int64_t head_dim, nlohmann::json& c) {
  c.erase("hidden_act");
  c["hidden_activation"] = "gelu_pytorch_tanh";
  c["head_dim"] = head_dim;
  c["attention_bias"] = false;
  c["query_pre_attn_scalar"] =
      o.query_pre_attn_scalar > 0.0 ? o.query_pre_attn_scalar : static_cast<double>(head_dim);
  auto cap = [](double v) { return v > 0.0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  c["attn_logit_softcapping"] = cap(o.attn_logit_softcapping);
  c["final_logit_softcapping"] = cap(o.final_logit_softcapping);
  c["sliding_window"] = o.sliding_window != 0 ? o.sliding_window : 4096;
  if (o.arch == TinyArch::kGemma3) {
    c["rope_local_base_freq"] = o.rope_local_base_freq;
    c["sliding_window_pattern"] = o.sliding_window_pattern;
    if (o.linear_rope_factor != 1.0) {
      c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", o.linear_rope_factor}};
    }
  }
}

// Qwen3MoeConfig's / MixtralConfig's expert fields.
void add_moe_fields(const TinyModelOptions& o, nlohmann::json& c) {
  if (o.arch == TinyArch::kQwen2Moe)
    c["shared_expert_intermediate_size"] = o.shared_expert_intermediate;
  if (o.arch == TinyArch::kQwen3Moe || o.arch == TinyArch::kQwen2Moe) {
    c["num_experts"] = o.num_experts;
    c["num_experts_per_tok"] = o.experts_per_tok;
    c["moe_intermediate_size"] = o.moe_intermediate;
    c["norm_topk_prob"] = o.norm_topk_prob;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = o.mlp_only_layers;
  }
  if (o.arch == TinyArch::kMixtral) {
    c["num_local_experts"] = o.num_experts;
    c["num_experts_per_tok"] = o.experts_per_tok;
  }
}

nlohmann::json config_json(const TinyModelOptions& o, std::int64_t head_dim,
                           const std::vector<std::int32_t>& eos) {
  nlohmann::json c = {
      {"architectures", {arch_class(o.arch)}},
      {"model_type", model_type(o.arch)},
      {"hidden_size", o.hidden},
      {"intermediate_size", o.intermediate},
      {"num_hidden_layers", o.layers},
      {"num_attention_heads", o.heads},
      {"num_key_value_heads", o.kv_heads},
      {"vocab_size", o.vocab},
      {"max_position_embeddings", o.max_positions},
      {"rms_norm_eps", o.rms_norm_eps},
      {"rope_theta", o.rope_theta},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", o.tie_word_embeddings},
      {"torch_dtype", o.dtype == core::DType::kF32    ? "float32"
                      : o.dtype == core::DType::kBF16 ? "bfloat16"
                                                      : "float16"},
      {"bos_token_id", nullptr},
      {"eos_token_id", eos.empty() ? nlohmann::json(nullptr) : nlohmann::json(eos.front())},
      {"rope_scaling", nullptr},
  };
  const bool qwen3 = o.arch == TinyArch::kQwen3 || o.arch == TinyArch::kQwen3Moe;
  if (o.head_dim != 0 || qwen3) c["head_dim"] = head_dim;
  if (o.arch == TinyArch::kLlama || qwen3 || o.arch == TinyArch::kOlmo2 ||
      o.arch == TinyArch::kPhi3) {
    c["attention_bias"] = false;
  }
  if (o.arch == TinyArch::kLlama && o.llama3_rope_scaling) {
    c["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", 8.0},
        {"low_freq_factor", 1.0},
        {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", std::max<std::int64_t>(o.max_positions / 4, 16)}};
  }
  if (o.arch == TinyArch::kPhi3) {
    c["original_max_position_embeddings"] = o.max_positions;
    if (o.partial_rotary_factor != 1.0) c["partial_rotary_factor"] = o.partial_rotary_factor;
  }
  add_moe_fields(o, c);
  if (o.arch == TinyArch::kMistral || o.arch == TinyArch::kPhi3 || o.arch == TinyArch::kMixtral) {
    c["sliding_window"] =
        o.sliding_window != 0 ? nlohmann::json(o.sliding_window) : nlohmann::json(nullptr);
  }
  if (o.arch == TinyArch::kQwen2 || o.arch == TinyArch::kQwen2Moe || qwen3) {
    c["use_sliding_window"] = o.sliding_window != 0;
    c["sliding_window"] = o.sliding_window != 0 ? o.sliding_window : o.max_positions;
    if (o.sliding_window != 0) c["max_window_layers"] = 0;
  }
  if (is_gemma(o.arch)) add_gemma_fields(o, head_dim, c);
  return c;
}

// Config the generator's tensors follow (the same required_weights() the loader checks).
model::ModelConfig model_config_of(const TinyModelOptions& o, std::int64_t head_dim) {
  model::ModelConfig c;
  c.vocab_size = o.vocab;
  c.hidden_size = o.hidden;
  c.intermediate_size = o.intermediate;
  c.num_layers = o.layers;
  c.num_heads = o.heads;
  c.num_kv_heads = o.kv_heads;
  c.head_dim = head_dim;
  c.tie_word_embeddings = o.tie_word_embeddings;
  c.attention_bias = o.arch == TinyArch::kQwen2 || o.arch == TinyArch::kQwen2Moe;
  if (o.arch == TinyArch::kQwen3 || o.arch == TinyArch::kQwen3Moe)
    c.qk_norm = model::QkNorm::kPerHead;
  if (is_moe(o.arch)) {
    c.architecture = o.arch == TinyArch::kMixtral    ? model::Architecture::kMixtral
                     : o.arch == TinyArch::kQwen2Moe ? model::Architecture::kQwen2Moe
                                                     : model::Architecture::kQwen3Moe;
    if (o.arch == TinyArch::kQwen2Moe)
      c.moe.shared_intermediate_size = o.shared_expert_intermediate;
    c.moe.num_experts = o.num_experts;
    c.moe.experts_per_tok = o.experts_per_tok;
    c.moe.intermediate_size = o.arch == TinyArch::kMixtral ? o.intermediate : o.moe_intermediate;
    c.moe.sparse_layers.assign(static_cast<std::size_t>(o.layers), 1);
    if (o.arch != TinyArch::kMixtral) {
      for (const std::int64_t l : o.mlp_only_layers)
        c.moe.sparse_layers[static_cast<std::size_t>(l)] = 0;
    }
  }
  if (o.arch == TinyArch::kOlmo2) {
    c.qk_norm = model::QkNorm::kFullWidth;
    c.norm_placement = model::NormPlacement::kPost;
  }
  c.fused_projections = o.arch == TinyArch::kPhi3;
  if (is_gemma(o.arch)) {
    c.norm_placement = model::NormPlacement::kSandwich;
    if (o.arch == TinyArch::kGemma3) c.qk_norm = model::QkNorm::kPerHead;
  }
  return c;
}

// Philox draws for tensor `stream`: value e = center + scale * (2u - 1).
void fill_tensor(const model::WeightSpec& spec, std::uint64_t seed, std::uint64_t stream,
                 core::DType dtype, bool norms_at_zero, std::vector<std::uint8_t>& out) {
  float center = 0.0f, scale = 0.0f;
  switch (spec.kind) {
    case model::WeightKind::kEmbed:
      scale = 1.0f;
      break;
    case model::WeightKind::kFinalNorm:
    case model::WeightKind::kInputNorm:
    case model::WeightKind::kPostNorm:
    case model::WeightKind::kPostFfNorm:
    case model::WeightKind::kQNorm:
    case model::WeightKind::kKNorm:
    case model::WeightKind::kPreFfNorm:
      center = norms_at_zero ? 0.0f : 1.0f;  // Gemma applies 1 + w
      scale = 0.1f;
      break;
    case model::WeightKind::kQBias:
    case model::WeightKind::kKBias:
    case model::WeightKind::kVBias:
      scale = 0.1f;
      break;
    default:  // linear [out][in]: uniform with variance 1 / fan_in
      scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(spec.shape[1])));
      break;
  }
  std::int64_t n = 1;
  for (const std::int64_t d : spec.shape) n *= d;
  out.resize(static_cast<std::size_t>(n) * core::dtype_size(dtype));
  PhiloxCounter block{};
  for (std::int64_t e = 0; e < n; ++e) {
    if (e % 4 == 0) block = philox_block(seed, stream, static_cast<std::uint64_t>(e / 4));
    const float u = uniform01(block[static_cast<std::size_t>(e % 4)]);
    const float v = center + scale * (2.0f * u - 1.0f);
    std::uint8_t* dst = out.data() + static_cast<std::size_t>(e) * core::dtype_size(dtype);
    if (dtype == core::DType::kF32) {
      std::memcpy(dst, &v, 4);
    } else {
      const std::uint16_t b = dtype == core::DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(dst, &b, 2);
    }
  }
}

std::string shard_name(std::int64_t i, std::int64_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05lld-of-%05lld.safetensors",
                static_cast<long long>(i + 1), static_cast<long long>(n));
  return buf;
}

}  // namespace

// The --arch names are config.json's model_type, but Gemma 3's ("gemma3_text").
const char* tiny_arch_name(TinyArch arch) {
  return arch == TinyArch::kGemma3 ? "gemma3" : model_type(arch);
}

TinyArch parse_tiny_arch(const std::string& name) {
  if (name == "llama") return TinyArch::kLlama;
  if (name == "mistral") return TinyArch::kMistral;
  if (name == "qwen2") return TinyArch::kQwen2;
  if (name == "qwen3") return TinyArch::kQwen3;
  if (name == "olmo2") return TinyArch::kOlmo2;
  if (name == "phi3") return TinyArch::kPhi3;
  if (name == "gemma2") return TinyArch::kGemma2;
  if (name == "gemma3") return TinyArch::kGemma3;
  if (name == "qwen3_moe") return TinyArch::kQwen3Moe;
  if (name == "mixtral") return TinyArch::kMixtral;
  if (name == "qwen2_moe") return TinyArch::kQwen2Moe;
  fail(ErrorCode::kInvalidArgument, "unknown architecture '", name,
       "' (llama, mistral, qwen2, qwen3, olmo2, phi3, gemma2, gemma3, qwen3_moe, mixtral, "
       "qwen2_moe)");
}

core::DType parse_weight_dtype(const std::string& name) {
  if (const auto d = core::parse_dtype(name)) return *d;
  fail(ErrorCode::kInvalidArgument, "unknown weight dtype '", name, "' (f32, bf16, f16)");
}

void make_tiny_model(const TinyModelOptions& o) {
  check_options(o);
  const std::int64_t head_dim = o.head_dim != 0 ? o.head_dim : o.hidden / o.heads;
  make_dirs(o.out_dir);
  const std::string dir = o.out_dir;
  std::vector<std::int32_t> eos;
  if (o.vocab >= kMinTokenizerVocab) {
    const TinySpecialIds ids = tiny_special_ids(o.vocab);
    eos = {ids.endoftext, ids.im_end};
    write_text(dir + "/tokenizer.json", make_tiny_tokenizer_json(o.vocab));
    write_text(dir + "/tokenizer_config.json", make_tiny_tokenizer_config_json());
  }
  write_text(dir + "/config.json", config_json(o, head_dim, eos).dump(2) + "\n");
  nlohmann::json gen = {{"bos_token_id", nullptr}, {"do_sample", false}};
  gen["eos_token_id"] = eos.empty() ? nlohmann::json(nullptr) : nlohmann::json(eos);
  write_text(dir + "/generation_config.json", gen.dump(2) + "\n");

  const std::vector<model::WeightSpec> specs =
      model::required_weights(model_config_of(o, head_dim));
  const core::DType dtype = o.dtype;
  if (o.shards > static_cast<std::int64_t>(specs.size())) {
    fail(ErrorCode::kInvalidArgument, "shards = ", o.shards, " exceeds the ", specs.size(),
         " tensors");
  }
  // Tensor i (in name order) is Philox stream i; shard s holds a contiguous name range.
  nlohmann::json weight_map = nlohmann::json::object();
  const auto n = static_cast<std::int64_t>(specs.size());
  for (std::int64_t s = 0; s < o.shards; ++s) {
    const std::int64_t begin = s * n / o.shards, end = (s + 1) * n / o.shards;
    std::vector<TensorEntry> entries;
    for (std::int64_t i = begin; i < end; ++i) {
      const model::WeightSpec& w = specs[static_cast<std::size_t>(i)];
      entries.push_back({w.name, dtype, w.shape});
    }
    const std::string file = o.shards == 1 ? "model.safetensors" : shard_name(s, o.shards);
    write_safetensors(
        dir + "/" + file, entries, [&](const TensorEntry& e, std::vector<std::uint8_t>& bytes) {
          for (std::int64_t i = begin; i < end; ++i) {
            const model::WeightSpec& w = specs[static_cast<std::size_t>(i)];
            if (w.name == e.name) {
              fill_tensor(w, o.seed, static_cast<std::uint64_t>(i), dtype, is_gemma(o.arch), bytes);
            }
          }
        });
    for (const auto& e : entries) weight_map[e.name] = file;
  }
  if (o.shards == 1) {
    ::unlink((dir + "/model.safetensors.index.json").c_str());  // a stale index would win
  } else {
    std::int64_t total = 0;
    for (const auto& w : specs) {
      std::int64_t k = static_cast<std::int64_t>(core::dtype_size(dtype));
      for (const std::int64_t d : w.shape) k *= d;
      total += k;
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total}}},
                                  {"weight_map", weight_map}};
    write_text(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
  }
  fuse_expert_tensors(dir, o.fused_experts);  // (kNone: nothing)
}

}  // namespace detinfer::devtools
