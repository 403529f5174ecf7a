#include "model/gemma_config.h"

#include <cmath>
#include <sstream>

#include "core/check.h"
#include "model/rope_config.h"

namespace detinfer::model {
namespace {

constexpr std::int64_t kMaxWindow = std::int64_t{1} << 24;

bool is_gemma(const ModelConfig& c) {
  return c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3;
}

// A soft-capping value: absent = `fallback`, null = none (0), else a finite number > 0.
double softcap_field(const nlohmann::json& j, core::ObjectReader& f, const char* key,
                     double fallback) {
  if (!j.contains(key)) return fallback;
  if (j[key].is_null()) return 0.0;
  const double v = core::as_number(j[key], f.path_of(key));
  if (!(v > 0.0) || v > 1e6) {
    fail(ErrorCode::kCorrupt, f.path_of(key), ": ", v, " (a soft-cap must be in (0, 1e6])");
  }
  return v;
}

// layer_types: one "sliding_attention" / "full_attention" per layer.
std::vector<std::uint8_t> layer_types(core::ObjectReader& f, const ModelConfig& c) {
  const nlohmann::json& a = f.array("layer_types");
  const std::string path = f.path_of("layer_types");
  if (static_cast<std::int64_t>(a.size()) != c.num_layers) {
    fail(ErrorCode::kCorrupt, path, ": ", a.size(), " entries for num_hidden_layers ",
         c.num_layers);
  }
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string t = core::as_string(a[i], path + "[" + std::to_string(i) + "]");
    if (t != "sliding_attention" && t != "full_attention") {
      fail(ErrorCode::kUnsupported, path, "[", i, "]: '", t,
           "' (only sliding_attention and full_attention)");
    }
    out.push_back(t == "sliding_attention" ? 1 : 0);
  }
  return out;
}

std::vector<std::uint8_t> all_layers(const ModelConfig& c) {
  return std::vector<std::uint8_t>(static_cast<std::size_t>(c.num_layers), 1);
}

// Gemma 2: even layers; Gemma 3: (i + 1) % sliding_window_pattern != 0; layer_types wins.
std::vector<std::uint8_t> gemma_layers(core::ObjectReader& f, const ModelConfig& c) {
  if (f.has("layer_types")) return layer_types(f, c);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(c.num_layers));
  const std::int64_t pattern = c.architecture == Architecture::kGemma2
                                   ? 2
                                   : f.integer_or("sliding_window_pattern", 1, 1024, 6);
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    out[static_cast<std::size_t>(i)] = (i + 1) % pattern != 0 ? 1 : 0;
  }
  return out;
}

}  // namespace

void parse_gemma_fields(const nlohmann::json& j, core::ObjectReader& f, ModelConfig& c) {
  if (!is_gemma(c)) return;
  const bool g2 = c.architecture == Architecture::kGemma2;
  const char* act_key = f.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = f.string_or(act_key, "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh") {
    fail(ErrorCode::kUnsupported, f.path_of(act_key), ": '", act,
         "' (Gemma: only gelu_pytorch_tanh)");
  }
  c.hidden_act = Activation::kGeluTanh;
  c.norm_placement = NormPlacement::kSandwich;
  c.norm_plus_one = true;
  c.scale_embeddings = true;
  c.attn_logit_softcapping = softcap_field(j, f, "attn_logit_softcapping", g2 ? 50.0 : 0.0);
  c.final_logit_softcapping = softcap_field(j, f, "final_logit_softcapping", g2 ? 30.0 : 0.0);
  c.query_pre_attn_scalar = f.number_or("query_pre_attn_scalar", 1e-6, 1e9, 256.0);
  if (!g2) {
    c.qk_norm = QkNorm::kPerHead;
    c.rope_local_theta = f.number_or("rope_local_base_freq", 1.0, 1e12, 10000.0);
  }
}

void parse_sliding_layers(core::ObjectReader& f, ModelConfig& c) {
  const Architecture a = c.architecture;
  bool applies = false;
  const bool qwen = a == Architecture::kQwen2 || a == Architecture::kQwen3 ||
                    a == Architecture::kQwen2Moe || a == Architecture::kQwen3Moe;
  if (a == Architecture::kMistral || a == Architecture::kPhi3 || a == Architecture::kMixtral) {
    applies = f.has("sliding_window");
  }
  if (qwen) applies = f.boolean_or("use_sliding_window", false) && f.has("sliding_window");
  if (is_gemma(c)) applies = true;
  if (!applies) return;
  c.sliding_window = is_gemma(c) ? f.integer_or("sliding_window", 1, kMaxWindow, 4096)
                                 : f.integer("sliding_window", 1, kMaxWindow);
  if (is_gemma(c)) {
    c.sliding_layers = gemma_layers(f, c);
  } else if (qwen) {
    // transformers: layer i slides when i >= max_window_layers (default 28), unless
    // layer_types says otherwise.
    if (f.has("layer_types")) {
      c.sliding_layers = layer_types(f, c);
    } else {
      const std::int64_t mwl = f.integer_or("max_window_layers", 0, 1 << 20, 28);
      c.sliding_layers.assign(static_cast<std::size_t>(c.num_layers), 0);
      for (std::int64_t i = mwl; i < c.num_layers; ++i) c.sliding_layers[i] = 1;
    }
  } else {
    c.sliding_layers = all_layers(c);
  }
  bool any = false;
  for (const std::uint8_t s : c.sliding_layers) any = any || s != 0;
  if (!any) {  // no layer slides: plain causal attention everywhere
    c.sliding_window = 0;
    c.sliding_layers.clear();
  }
}

std::string gemma_config_text(const ModelConfig& c) {
  std::ostringstream os;
  bool every = !c.sliding_layers.empty();
  for (const std::uint8_t s : c.sliding_layers) every = every && s != 0;
  if (!c.sliding_layers.empty() && !every) {
    os << "sliding_layers=";
    for (const std::uint8_t s : c.sliding_layers) os << (s != 0 ? '1' : '0');
    os << "\n";
  }
  if (c.hidden_act != Activation::kSilu) os << "hidden_act=gelu_pytorch_tanh\n";
  if (c.norm_plus_one) os << "norm_plus_one=1\n";
  if (c.scale_embeddings) os << "scale_embeddings=1\n";
  if (c.attn_logit_softcapping > 0.0)
    os << "attn_logit_softcapping=" << hex_bits(c.attn_logit_softcapping) << "\n";
  if (c.final_logit_softcapping > 0.0)
    os << "final_logit_softcapping=" << hex_bits(c.final_logit_softcapping) << "\n";
  if (c.query_pre_attn_scalar > 0.0)
    os << "query_pre_attn_scalar=" << hex_bits(c.query_pre_attn_scalar) << "\n";
  if (c.rope_local_theta > 0.0) os << "rope_local_theta=" << hex_bits(c.rope_local_theta) << "\n";
  return os.str();
}

float gemma_embed_scale(std::int64_t hidden_size, core::DType embed_dtype) {
  auto s = static_cast<float>(std::sqrt(static_cast<double>(hidden_size)));
  kernels::round_to_dtype(&s, &s, 1, embed_dtype);  // correctly rounded sqrt: exact spec
  return s;
}

}  // namespace detinfer::model
