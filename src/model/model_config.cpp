#include "model/model_config.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"
#include "core/json_fields.h"
#include "core/json_parse.h"
#include "core/log.h"
#include "model/gemma_config.h"
#include "model/moe_config.h"
#include "model/rope_config.h"

namespace detinfer::model {
namespace {

using nlohmann::json;

// config.json and generation_config.json are small and shallow.
constexpr core::JsonLimits kConfigLimits{/*max_depth=*/32, /*max_bytes=*/std::size_t{16} << 20,
                                         /*reject_duplicate_keys=*/true};

constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;  // bound on any size field

// config.json holds many fields this reader does not use, and null means absent.
constexpr core::JsonReadPolicy kConfigPolicy{ErrorCode::kCorrupt, /*reject_unknown=*/false,
                                             /*null_is_absent=*/true, "config.json"};

using Fields = core::ObjectReader;

// An int, a list of ints, or null/absent (empty).
std::vector<std::int32_t> token_ids(Fields& f, const char* key) {
  std::vector<std::int32_t> out;
  const json* v = f.optional(key);
  if (v == nullptr) return out;
  const std::string path = f.path_of(key);
  if (v->is_array()) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      out.push_back(static_cast<std::int32_t>(core::as_integer(
          (*v)[i], path + "[" + std::to_string(i) + "]", 0, 0x7fffffff, kConfigPolicy.code)));
    }
  } else {
    out.push_back(
        static_cast<std::int32_t>(core::as_integer(*v, path, 0, 0x7fffffff, kConfigPolicy.code)));
  }
  return out;
}

Architecture parse_architecture(Fields& f) {
  std::string name;
  if (f.has("architectures")) {
    const json& a = *f.optional("architectures");
    if (!a.is_array() || a.size() != 1 || !a[0].is_string()) {
      fail(ErrorCode::kUnsupported, f.path(), ": 'architectures' must list exactly one class");
    }
    name = a[0].get<std::string>();
  } else {
    const std::string mt = f.string_or("model_type", "");
    if (mt == "llama") name = "LlamaForCausalLM";
    if (mt == "mistral") name = "MistralForCausalLM";
    if (mt == "qwen2") name = "Qwen2ForCausalLM";
    if (mt == "qwen3") name = "Qwen3ForCausalLM";
    if (mt == "olmo2") name = "Olmo2ForCausalLM";
    if (mt == "phi3") name = "Phi3ForCausalLM";
    if (mt == "gemma2") name = "Gemma2ForCausalLM";
    if (mt == "gemma3_text") name = "Gemma3ForCausalLM";
    if (mt == "qwen3_moe") name = "Qwen3MoeForCausalLM";
    if (mt == "mixtral") name = "MixtralForCausalLM";
    if (mt == "qwen2_moe") name = "Qwen2MoeForCausalLM";
    if (name.empty())
      fail(ErrorCode::kUnsupported, f.path(), ": unsupported model_type '", mt, "'");
  }
  for (Architecture a :
       {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2, Architecture::kQwen3,
        Architecture::kOlmo2, Architecture::kPhi3, Architecture::kGemma2, Architecture::kGemma3,
        Architecture::kQwen3Moe, Architecture::kMixtral, Architecture::kQwen2Moe}) {
    if (name == to_string(a)) return a;
  }
  fail(ErrorCode::kUnsupported, f.path(), ": unsupported architecture '", name,
       "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
       "Olmo2ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
       "Qwen3MoeForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM)");
}

void reject_unsupported(Fields& f, const ModelConfig& c) {
  const bool gemma =
      c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3;
  const std::string act = gemma ? "silu" : f.string_or("hidden_act", "silu");  // Gemma: own
  if (act != "silu")
    fail(ErrorCode::kUnsupported, f.path(), ": hidden_act '", act, "' (only silu)");
  if (f.has("quantization_config")) {
    fail(ErrorCode::kUnsupported, f.path(), ": quantized checkpoints are not supported");
  }
  if (f.boolean_or("mlp_bias", false)) {
    fail(ErrorCode::kUnsupported, f.path(), ": mlp_bias = true is not supported");
  }
  // Llama, Qwen3 and OLMo 2 put attention_bias on o_proj as well; only Qwen2's q/k/v-only
  // biases are implemented.
  const bool qkv_bias =
      c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen2Moe;
  if (!qkv_bias && f.boolean_or("attention_bias", false)) {
    fail(ErrorCode::kUnsupported, f.path(), ": attention_bias = true is not supported for ",
         to_string(c.architecture));
  }
}

// partial_rotary_factor, at the top level or inside rope_scaling (where transformers'
// rope_parameters put it; that one wins): Phi-3 rotates the first int(head_dim * factor)
// dimensions of each head (transformers' int(): truncation of the double product); the
// other architectures rotate all of them and refuse another factor.
void parse_partial_rotary(Fields& f, ModelConfig& c) {
  double p = f.number_or("partial_rotary_factor", 1e-9, 1.0, 1.0);
  std::string field = f.path_of("partial_rotary_factor");
  if (f.has("rope_scaling")) {
    Fields r = f.object("rope_scaling");
    if (r.has("partial_rotary_factor")) {
      p = r.number_or("partial_rotary_factor", 1e-9, 1.0, 1.0);
      field = r.path_of("partial_rotary_factor");
    }
  }
  if (p == 1.0) return;
  if (c.architecture != Architecture::kPhi3) {
    fail(ErrorCode::kUnsupported, field, ": ", p, " (partial rotary is implemented for ",
         to_string(Architecture::kPhi3), " only)");
  }
  const auto dims = static_cast<std::int64_t>(static_cast<double>(c.head_dim) * p);
  if (dims < 2 || dims % 2 != 0) {
    fail(ErrorCode::kCorrupt, field, ": ", p, " gives ", dims,
         " rotary dimensions per head (must be even and at least 2)");
  }
  if (dims != c.head_dim) c.partial_rotary_dim = dims;
}

}  // namespace

const char* to_string(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "LlamaForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
    case Architecture::kOlmo2:
      return "Olmo2ForCausalLM";
    case Architecture::kPhi3:
      return "Phi3ForCausalLM";
    case Architecture::kGemma2:
      return "Gemma2ForCausalLM";
    case Architecture::kGemma3:
      return "Gemma3ForCausalLM";
    case Architecture::kQwen3Moe:
      return "Qwen3MoeForCausalLM";
    case Architecture::kMixtral:
      return "MixtralForCausalLM";
    case Architecture::kQwen2Moe:
      return "Qwen2MoeForCausalLM";
  }
  return "?";
}

namespace {

// head_dim: config.json's, else hidden_size / num_attention_heads (Gemma: 256).
void parse_head_dim(Fields& f, ModelConfig& c, bool gemma, const std::string& where) {
  if (gemma && !f.has("head_dim")) {
    c.head_dim = 256;  // Gemma2Config / Gemma3TextConfig default
  } else if (f.has("head_dim")) {
    c.head_dim = f.integer("head_dim", 2, 4096);
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      fail(ErrorCode::kCorrupt, where, ": hidden_size ", c.hidden_size,
           " is not a multiple of num_attention_heads ", c.num_heads, " and head_dim is absent");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) fail(ErrorCode::kCorrupt, where, ": head_dim ", c.head_dim, " is odd");
}

}  // namespace

ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& where) {
  const json j = core::parse_json(config_json, kConfigLimits, ErrorCode::kCorrupt, where);
  if (!j.is_object()) fail(ErrorCode::kCorrupt, where, ": not a JSON object");
  Fields f(j, where, kConfigPolicy);
  ModelConfig c;
  c.architecture = parse_architecture(f);
  c.vocab_size = f.integer("vocab_size", 1, std::int64_t{1} << 24);
  c.hidden_size = f.integer("hidden_size", 1, kMaxDim);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxDim);
  c.num_layers = f.integer("num_hidden_layers", 1, 1024);
  c.num_heads = f.integer("num_attention_heads", 1, 4096);
  c.num_kv_heads = f.integer_or("num_key_value_heads", 1, 4096, c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    fail(ErrorCode::kCorrupt, where, ": num_attention_heads ", c.num_heads,
         " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  }
  const bool gemma =
      c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3;
  parse_head_dim(f, c, gemma, where);
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kMaxDim * 16);
  // transformers' defaults: 1e-5 for OLMo 2, Phi-3 and Mixtral (Olmo2Config, Phi3Config,
  // MixtralConfig), 1e-6 for the others; rope_theta 1e6 for Mixtral, 10000 for the others.
  const bool eps_1e5 = c.architecture == Architecture::kOlmo2 ||
                       c.architecture == Architecture::kPhi3 ||
                       c.architecture == Architecture::kMixtral;
  const double eps = f.number_or("rms_norm_eps", 0.0, 1.0, eps_1e5 ? 1e-5 : 1e-6);
  c.rms_norm_eps = static_cast<float>(eps);
  // Gemma3TextConfig's and MixtralConfig's default base is 1e6; Gemma 2 and Gemma 3 tie by
  // default.
  const double theta0 =
      c.architecture == Architecture::kGemma3 || c.architecture == Architecture::kMixtral ? 1e6
                                                                                          : 10000.0;
  c.rope_theta = f.number_or("rope_theta", 1.0, 1e12, theta0);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", gemma);
  c.attention_bias =
      c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen2Moe;
  if (c.architecture == Architecture::kQwen3) c.qk_norm = QkNorm::kPerHead;
  if (c.architecture == Architecture::kQwen3Moe) c.qk_norm = QkNorm::kPerHead;
  if (c.architecture == Architecture::kOlmo2) {
    c.qk_norm = QkNorm::kFullWidth;
    c.norm_placement = NormPlacement::kPost;
  }
  c.fused_projections = c.architecture == Architecture::kPhi3;
  reject_unsupported(f, c);
  parse_partial_rotary(f, c);
  parse_rope_scaling(f, c);
  parse_gemma_fields(j, f, c);
  parse_sliding_layers(f, c);
  parse_moe_config(f, c);
  c.bos_token_ids = token_ids(f, "bos_token_id");
  c.eos_token_ids = token_ids(f, "eos_token_id");
  if (!generation_json.empty()) {
    const std::string gwhere = where + " (generation_config.json)";
    const json g = core::parse_json(generation_json, kConfigLimits, ErrorCode::kCorrupt, gwhere);
    if (!g.is_object()) fail(ErrorCode::kCorrupt, gwhere, ": not a JSON object");
    Fields gf(g, gwhere, kConfigPolicy);
    if (gf.has("bos_token_id")) c.bos_token_ids = token_ids(gf, "bos_token_id");
    if (gf.has("eos_token_id")) c.eos_token_ids = token_ids(gf, "eos_token_id");
  }
  for (const auto* ids : {&c.bos_token_ids, &c.eos_token_ids}) {
    for (const std::int32_t id : *ids) {
      if (id >= c.vocab_size) {
        fail(ErrorCode::kCorrupt, where, ": bos/eos token id ", id, " >= vocab_size ",
             c.vocab_size);
      }
    }
  }
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const std::string gen_path = dir + "/generation_config.json";
  struct stat st {};
  const bool has_gen = ::stat(gen_path.c_str(), &st) == 0;
  return parse_model_config(
      core::read_file_bounded(path, kConfigLimits.max_bytes, "config.json"),
      has_gen ? core::read_file_bounded(gen_path, kConfigLimits.max_bytes, "generation_config.json")
              : "",
      path);
}

std::string canonical_config_text(const ModelConfig& c) {
  std::ostringstream os;
  auto ids = [](const std::vector<std::int32_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
  };
  os << "architecture=" << to_string(c.architecture) << "\n"
     << "vocab_size=" << c.vocab_size << "\n"
     << "hidden_size=" << c.hidden_size << "\n"
     << "intermediate_size=" << c.intermediate_size << "\n"
     << "num_hidden_layers=" << c.num_layers << "\n"
     << "num_attention_heads=" << c.num_heads << "\n"
     << "num_key_value_heads=" << c.num_kv_heads << "\n"
     << "head_dim=" << c.head_dim << "\n";
  // Written only for partial rotary (Phi-3), so that other texts keep their bytes.
  if (c.partial_rotary_dim != 0) os << "partial_rotary_dim=" << c.partial_rotary_dim << "\n";
  // Spec v1 capped the context at the window; written so for the architectures it did.
  const Architecture a = c.architecture;
  const bool capped =
      c.sliding_window > 0 && (a == Architecture::kMistral || a == Architecture::kQwen2 ||
                               a == Architecture::kQwen3 || a == Architecture::kPhi3);
  os << "max_position_embeddings="
     << (capped ? std::min(c.max_position_embeddings, c.sliding_window) : c.max_position_embeddings)
     << "\n"
     << "sliding_window=" << c.sliding_window << "\n"
     << "rms_norm_eps=" << hex_bits(static_cast<double>(c.rms_norm_eps)) << "\n"
     << "rope_theta=" << hex_bits(c.rope_theta) << "\n";
  write_rope_scaling(os, c.rope_scaling);
  os << "tie_word_embeddings=" << (c.tie_word_embeddings ? 1 : 0) << "\n"
     << "attention_bias=" << (c.attention_bias ? 1 : 0) << "\n"
     << "qk_norm=" << static_cast<int>(c.qk_norm) << "\n";
  // Written only for OLMo 2, so that the other architectures' texts keep their bytes.
  if (c.norm_placement == NormPlacement::kPost) os << "norm_placement=post\n";
  os << gemma_config_text(c);   // nothing unless windows per layer or Gemma
  write_moe_config(os, c.moe);  // MoE architectures only, for the same reason
  os << "bos_token_ids=" << ids(c.bos_token_ids) << "\n"
     << "eos_token_ids=" << ids(c.eos_token_ids) << "\n";
  return os.str();
}

}  // namespace detinfer::model
