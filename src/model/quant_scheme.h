// What SessionOptions::weights and `detinfer quantize --type` name: one quantized format
// for every linear ("q4_k"), or a llama.cpp-style mix ("q4_k_m") that picks a format per
// tensor by its role and layer, as llama.cpp's quantizer does for the dense architectures
// (docs/gguf.md, "Quantization mixes"). The choice is a pure function of the scheme, the
// tensor and the model config, so a mix is as reproducible as a single format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/quant.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace detinfer::model {

enum class QuantMix : std::uint8_t {
  kNone,  // the base format everywhere
  kQ3KM,  // MOSTLY_Q3_K_M
  kQ4KS,  // MOSTLY_Q4_K_S
  kQ4KM,  // MOSTLY_Q4_K_M
  kQ5KS,  // MOSTLY_Q5_K_S
  kQ5KM,  // MOSTLY_Q5_K_M
};

struct QuantScheme {
  std::string name = "q8_0";                                // "q4_k_m"
  kernels::QuantFormat base = kernels::QuantFormat::kQ8_0;  // the format of most tensors
  QuantMix mix = QuantMix::kNone;
  QuantScheme() = default;
  QuantScheme(std::string n, kernels::QuantFormat b, QuantMix m)
      : name(std::move(n)), base(b), mix(m) {}
  // One format everywhere (implicit: a format is the simplest scheme).
  QuantScheme(kernels::QuantFormat f)  // NOLINT(google-explicit-constructor)
      : name(kernels::to_string(f)), base(f) {}
};

// A format name (kernels::parse_quant_format) or a mix name: q3_k_m, q4_k_s, q4_k_m,
// q5_k_s, q5_k_m.
bool parse_quant_scheme(std::string_view name, QuantScheme* out);

// Every accepted name, "q8_0 | q4_0 | ... | q5_k_m", for messages and help.
std::string quant_scheme_names();

// The format of 2-D weight `spec` (rows of k = spec.shape.back()) under `scheme`:
//   - a single format: that format;
//   - a mix: llama.cpp's rule for the tensor's role (lm_head, or a tied embedding, q6_k;
//     attn_v and ffn_down more bits in the layers llama.cpp's use_more_bits picks, ...).
// A K format for rows that are not whole super-blocks falls back as llama.cpp does (q4_k to
// q5_0, q5_k to q5_1, q6_k to q8_0, q2_k / q3_k to q4_0). nullopt: not a linear weight.
std::optional<kernels::QuantFormat> scheme_format_for(const QuantScheme& scheme,
                                                      const WeightSpec& spec,
                                                      const ModelConfig& config);

// llama.cpp's general.file_type number of a file quantized with `scheme` (MOSTLY_Q4_K_M 15,
// ...; a single format: the MOSTLY_ type of that format).
std::uint32_t gguf_file_type(const QuantScheme& scheme);

}  // namespace detinfer::model
