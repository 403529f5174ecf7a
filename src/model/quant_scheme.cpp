// Quantization schemes: single formats and llama.cpp's K-quant mixes (quant_scheme.h).
#include "model/quant_scheme.h"

#include "model/quantize_weights.h"

namespace detinfer::model {
namespace {

using kernels::QuantFormat;

struct MixName {
  const char* name;
  QuantMix mix;
  QuantFormat base;
  std::uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_MOSTLY_* number
};
constexpr MixName kMixes[] = {
    {"q3_k_m", QuantMix::kQ3KM, QuantFormat::kQ3_K, 12},
    {"q4_k_s", QuantMix::kQ4KS, QuantFormat::kQ4_K, 14},
    {"q4_k_m", QuantMix::kQ4KM, QuantFormat::kQ4_K, 15},
    {"q5_k_s", QuantMix::kQ5KS, QuantFormat::kQ5_K, 16},
    {"q5_k_m", QuantMix::kQ5KM, QuantFormat::kQ5_K, 17},
};

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third
// layer in between get more bits.
bool use_more_bits(std::int64_t i, std::int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// llama.cpp's llama_tensor_get_type for a dense, non-Falcon model of fewer than 70B
// parameters (no experts), for the mixes above; `base` elsewhere.
QuantFormat mix_format(const QuantScheme& s, const WeightSpec& spec, const ModelConfig& c) {
  const QuantMix mix = s.mix;
  const std::int64_t i = spec.layer, n = c.num_layers;
  if (spec.kind == WeightKind::kLmHead ||
      (spec.kind == WeightKind::kEmbed && c.tie_word_embeddings))
    return QuantFormat::kQ6_K;  // output.weight (or token_embd when it is the output)
  switch (spec.kind) {
    case WeightKind::kV:  // attn_v
      if (mix == QuantMix::kQ3KM) return i < 2 ? QuantFormat::kQ5_K : QuantFormat::kQ4_K;
      if ((mix == QuantMix::kQ4KM || mix == QuantMix::kQ5KM) && use_more_bits(i, n))
        return QuantFormat::kQ6_K;
      if (mix == QuantMix::kQ4KS && i < 4) return QuantFormat::kQ5_K;
      return s.base;
    case WeightKind::kDown:              // ffn_down
    case WeightKind::kExpertDown:        // ffn_down_exps (llama.cpp applies the ffn_down rules)
    case WeightKind::kSharedExpertDown:  // ffn_down_shexp (likewise)
      if (mix == QuantMix::kQ3KM) return i < n / 16 ? QuantFormat::kQ5_K : QuantFormat::kQ4_K;
      if ((mix == QuantMix::kQ4KM || mix == QuantMix::kQ5KM) && use_more_bits(i, n))
        return QuantFormat::kQ6_K;
      if (mix == QuantMix::kQ4KS && i < n / 8) return QuantFormat::kQ5_K;
      return s.base;
    case WeightKind::kO:  // attn_output
      return mix == QuantMix::kQ3KM ? QuantFormat::kQ4_K : s.base;
    case WeightKind::kQkv:  // attn_qkv (fused)
      if (mix == QuantMix::kQ3KM) return QuantFormat::kQ4_K;
      if (mix == QuantMix::kQ4KM) return QuantFormat::kQ5_K;
      if (mix == QuantMix::kQ5KM) return QuantFormat::kQ6_K;
      return s.base;
    default:
      return s.base;
  }
}

// llama.cpp's fallback for a K format whose rows are not whole super-blocks (with q4_0 for
// q2_k / q3_k, where llama.cpp uses IQ4_NL, which detinfer does not have).
QuantFormat fallback(QuantFormat f, std::int64_t k) {
  if (k % kernels::quant_format_info(f).block_elems == 0) return f;
  switch (f) {
    case QuantFormat::kQ4_K:
      return QuantFormat::kQ5_0;
    case QuantFormat::kQ5_K:
      return QuantFormat::kQ5_1;
    case QuantFormat::kQ6_K:
      return QuantFormat::kQ8_0;
    case QuantFormat::kQ2_K:
    case QuantFormat::kQ3_K:
      return QuantFormat::kQ4_0;
    default:
      return f;
  }
}

}  // namespace

bool parse_quant_scheme(std::string_view name, QuantScheme* out) {
  QuantFormat f;
  if (kernels::parse_quant_format(name, &f)) {
    *out = QuantScheme{std::string(name), f, QuantMix::kNone};
    return true;
  }
  for (const MixName& m : kMixes) {
    if (name == m.name) {
      *out = QuantScheme{m.name, m.base, m.mix};
      return true;
    }
  }
  return false;
}

std::string quant_scheme_names() {
  std::string out;
  for (const QuantFormat f : kernels::kAllQuantFormats)
    out += (out.empty() ? "" : " | ") + std::string(kernels::to_string(f));
  for (const MixName& m : kMixes) out += std::string(" | ") + m.name;
  return out;
}

std::optional<QuantFormat> scheme_format_for(const QuantScheme& scheme, const WeightSpec& spec,
                                             const ModelConfig& config) {
  if (!is_linear_kind(spec.kind) && spec.kind != WeightKind::kEmbed) return std::nullopt;
  if (spec.shape.size() != 2) return std::nullopt;
  const QuantFormat f =
      scheme.mix == QuantMix::kNone ? scheme.base : mix_format(scheme, spec, config);
  return fallback(f, spec.shape.back());
}

std::uint32_t gguf_file_type(const QuantScheme& scheme) {
  for (const MixName& m : kMixes)
    if (m.mix == scheme.mix && scheme.mix != QuantMix::kNone) return m.file_type;
  // llama.cpp's MOSTLY_ numbers of the single formats (Q3_K: Q3_K_S, Q4_K: Q4_K_S, ...).
  constexpr std::uint32_t kSingle[] = {7, 2, 8, 3, 9, 10, 11, 14, 16, 18};  // QuantFormat order
  return kSingle[static_cast<int>(scheme.base)];
}

}  // namespace detinfer::model
