#include "model/model_config.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"
#include "core/json_reader.h"
#include "core/log.h"

namespace detinfer::model {
namespace {

using nlohmann::json;

// config.json and generation_config.json are small and shallow.
constexpr core::JsonLimits kConfigLimits{/*max_depth=*/32, /*max_bytes=*/std::size_t{16} << 20,
                                         /*reject_duplicate_keys=*/true};

constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;  // bound on any size field

class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const {
    const auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  const json& at(const char* key) const { return *j_.find(key); }

  std::int64_t int_field(const char* key, std::int64_t lo, std::int64_t hi) const {
    if (!has(key)) fail(ErrorCode::kCorrupt, where_, ": missing field '", key, "'");
    return int_value(key, lo, hi);
  }
  std::int64_t int_field(const char* key, std::int64_t lo, std::int64_t hi,
                         std::int64_t dflt) const {
    return has(key) ? int_value(key, lo, hi) : dflt;
  }
  double num_field(const char* key, double lo, double hi, double dflt) const {
    if (!has(key)) return dflt;
    const json& v = at(key);
    if (!v.is_number()) fail(ErrorCode::kCorrupt, where_, ": field '", key, "' is not a number");
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi)) {
      fail(ErrorCode::kCorrupt, where_, ": field '", key, "' = ", d, " is outside [", lo, ", ", hi,
           "]");
    }
    return d;
  }
  bool bool_field(const char* key, bool dflt) const {
    if (!has(key)) return dflt;
    if (!at(key).is_boolean())
      fail(ErrorCode::kCorrupt, where_, ": field '", key, "' is not a boolean");
    return at(key).get<bool>();
  }
  std::string string_field(const char* key, const std::string& dflt) const {
    if (!has(key)) return dflt;
    if (!at(key).is_string())
      fail(ErrorCode::kCorrupt, where_, ": field '", key, "' is not a string");
    return at(key).get<std::string>();
  }
  // An int, a list of ints, or null/absent (empty).
  std::vector<std::int32_t> token_ids(const char* key) const {
    std::vector<std::int32_t> out;
    if (!has(key)) return out;
    const json& v = at(key);
    auto one = [&](const json& x) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
          x.get<std::int64_t>() > std::int64_t{0x7fffffff}) {
        fail(ErrorCode::kCorrupt, where_, ": field '", key, "' holds an invalid token id");
      }
      out.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
    };
    if (v.is_array()) {
      for (const auto& x : v) one(x);
    } else {
      one(v);
    }
    return out;
  }
  const std::string& where() const { return where_; }

 private:
  std::int64_t int_value(const char* key, std::int64_t lo, std::int64_t hi) const {
    const json& v = at(key);
    if (!v.is_number_integer())
      fail(ErrorCode::kCorrupt, where_, ": field '", key, "' is not an integer");
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi) {
      fail(ErrorCode::kCorrupt, where_, ": field '", key, "' = ", x, " is outside [", lo, ", ", hi,
           "]");
    }
    return x;
  }

  const json& j_;
  std::string where_;
};

Architecture parse_architecture(const Fields& f) {
  std::string name;
  if (f.has("architectures")) {
    const json& a = f.at("architectures");
    if (!a.is_array() || a.size() != 1 || !a[0].is_string()) {
      fail(ErrorCode::kUnsupported, f.where(), ": 'architectures' must list exactly one class");
    }
    name = a[0].get<std::string>();
  } else {
    const std::string mt = f.string_field("model_type", "");
    if (mt == "llama") name = "LlamaForCausalLM";
    if (mt == "mistral") name = "MistralForCausalLM";
    if (mt == "qwen2") name = "Qwen2ForCausalLM";
    if (mt == "qwen3") name = "Qwen3ForCausalLM";
    if (name.empty())
      fail(ErrorCode::kUnsupported, f.where(), ": unsupported model_type '", mt, "'");
  }
  for (Architecture a :
       {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2, Architecture::kQwen3}) {
    if (name == to_string(a)) return a;
  }
  fail(ErrorCode::kUnsupported, f.where(), ": unsupported architecture '", name,
       "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
}

void parse_rope_scaling(const Fields& f, ModelConfig& c) {
  if (!f.has("rope_scaling")) return;
  const json& rs = f.at("rope_scaling");
  if (!rs.is_object()) fail(ErrorCode::kCorrupt, f.where(), ": 'rope_scaling' is not an object");
  const Fields r(rs, f.where() + " rope_scaling");
  std::string type = r.string_field("rope_type", r.string_field("type", ""));
  if (type == "default") return;
  if (type != "llama3") {
    fail(ErrorCode::kUnsupported, f.where(), ": rope_scaling type '", type,
         "' is not supported (supported: llama3)");
  }
  c.rope_scaling.type = type;
  c.rope_scaling.factor = r.num_field("factor", 1.0, 1e6, 8.0);
  c.rope_scaling.low_freq_factor = r.num_field("low_freq_factor", 1e-6, 1e6, 1.0);
  c.rope_scaling.high_freq_factor = r.num_field("high_freq_factor", 1e-6, 1e6, 4.0);
  c.rope_scaling.original_max_position_embeddings =
      r.int_field("original_max_position_embeddings", 1, kMaxDim * 16, 8192);
  if (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor)) {
    fail(ErrorCode::kCorrupt, f.where(),
         ": rope_scaling high_freq_factor must exceed low_freq_factor");
  }
}

void reject_unsupported(const Fields& f, const ModelConfig& c) {
  const std::string act = f.string_field("hidden_act", "silu");
  if (act != "silu")
    fail(ErrorCode::kUnsupported, f.where(), ": hidden_act '", act, "' (only silu)");
  if (f.has("quantization_config")) {
    fail(ErrorCode::kUnsupported, f.where(), ": quantized checkpoints are not supported");
  }
  if (f.bool_field("mlp_bias", false)) {
    fail(ErrorCode::kUnsupported, f.where(), ": mlp_bias = true is not supported");
  }
  // Llama and Qwen3 put attention_bias on o_proj as well; only Qwen2's q/k/v-only biases
  // are implemented.
  if (c.architecture != Architecture::kQwen2 && f.bool_field("attention_bias", false)) {
    fail(ErrorCode::kUnsupported, f.where(), ": attention_bias = true is not supported for ",
         to_string(c.architecture));
  }
}

void apply_sliding_window(const Fields& f, ModelConfig& c) {
  bool applies = false;
  if (c.architecture == Architecture::kMistral) applies = f.has("sliding_window");
  if (c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen3) {
    applies = f.bool_field("use_sliding_window", false) && f.has("sliding_window");
  }
  if (!applies) return;
  c.sliding_window = f.int_field("sliding_window", 1, kMaxDim * 16);
  if (c.sliding_window < c.max_position_embeddings) {
    logger().info("{}: sliding_window {} < max_position_embeddings {}: context limited to {}",
                  f.where(), c.sliding_window, c.max_position_embeddings, c.sliding_window);
    c.max_position_embeddings = c.sliding_window;
  }
}

std::string hex_bits(double d) {
  std::uint64_t u = 0;
  std::memcpy(&u, &d, sizeof u);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(u));
  return buf;
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
  }
  return "?";
}

ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& where) {
  const json j = core::parse_json(config_json, kConfigLimits, ErrorCode::kCorrupt, where);
  if (!j.is_object()) fail(ErrorCode::kCorrupt, where, ": not a JSON object");
  const Fields f(j, where);
  ModelConfig c;
  c.architecture = parse_architecture(f);
  c.vocab_size = f.int_field("vocab_size", 1, std::int64_t{1} << 24);
  c.hidden_size = f.int_field("hidden_size", 1, kMaxDim);
  c.intermediate_size = f.int_field("intermediate_size", 1, kMaxDim);
  c.num_layers = f.int_field("num_hidden_layers", 1, 1024);
  c.num_heads = f.int_field("num_attention_heads", 1, 4096);
  c.num_kv_heads = f.int_field("num_key_value_heads", 1, 4096, c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    fail(ErrorCode::kCorrupt, where, ": num_attention_heads ", c.num_heads,
         " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  }
  if (f.has("head_dim")) {
    c.head_dim = f.int_field("head_dim", 2, 4096);
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      fail(ErrorCode::kCorrupt, where, ": hidden_size ", c.hidden_size,
           " is not a multiple of num_attention_heads ", c.num_heads, " and head_dim is absent");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) fail(ErrorCode::kCorrupt, where, ": head_dim ", c.head_dim, " is odd");
  c.max_position_embeddings = f.int_field("max_position_embeddings", 1, kMaxDim * 16);
  const double eps = f.num_field("rms_norm_eps", 0.0, 1.0, 1e-6);
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = f.num_field("rope_theta", 1.0, 1e12, 10000.0);
  c.tie_word_embeddings = f.bool_field("tie_word_embeddings", false);
  c.attention_bias = c.architecture == Architecture::kQwen2;
  c.qk_norm = c.architecture == Architecture::kQwen3;
  reject_unsupported(f, c);
  parse_rope_scaling(f, c);
  apply_sliding_window(f, c);
  c.bos_token_ids = f.token_ids("bos_token_id");
  c.eos_token_ids = f.token_ids("eos_token_id");
  if (!generation_json.empty()) {
    const std::string gwhere = where + " (generation_config.json)";
    const json g = core::parse_json(generation_json, kConfigLimits, ErrorCode::kCorrupt, gwhere);
    if (!g.is_object()) fail(ErrorCode::kCorrupt, gwhere, ": not a JSON object");
    const Fields gf(g, gwhere);
    if (gf.has("bos_token_id")) c.bos_token_ids = gf.token_ids("bos_token_id");
    if (gf.has("eos_token_id")) c.eos_token_ids = gf.token_ids("eos_token_id");
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
     << "head_dim=" << c.head_dim << "\n"
     << "max_position_embeddings=" << c.max_position_embeddings << "\n"
     << "sliding_window=" << c.sliding_window << "\n"
     << "rms_norm_eps=" << hex_bits(static_cast<double>(c.rms_norm_eps)) << "\n"
     << "rope_theta=" << hex_bits(c.rope_theta) << "\n"
     << "rope_scaling.type=" << c.rope_scaling.type << "\n";
  if (!c.rope_scaling.type.empty()) {
    os << "rope_scaling.factor=" << hex_bits(c.rope_scaling.factor) << "\n"
       << "rope_scaling.low_freq_factor=" << hex_bits(c.rope_scaling.low_freq_factor) << "\n"
       << "rope_scaling.high_freq_factor=" << hex_bits(c.rope_scaling.high_freq_factor) << "\n"
       << "rope_scaling.original_max_position_embeddings="
       << c.rope_scaling.original_max_position_embeddings << "\n";
  }
  os << "tie_word_embeddings=" << (c.tie_word_embeddings ? 1 : 0) << "\n"
     << "attention_bias=" << (c.attention_bias ? 1 : 0) << "\n"
     << "qk_norm=" << (c.qk_norm ? 1 : 0) << "\n"
     << "bos_token_ids=" << ids(c.bos_token_ids) << "\n"
     << "eos_token_ids=" << ids(c.eos_token_ids) << "\n";
  return os.str();
}

}  // namespace detinfer::model
