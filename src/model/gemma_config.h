// config.json fields of Gemma 2 / Gemma 3 text and the per-layer sliding windows of every
// architecture (issue 29; docs/models.md, docs/numerics.md "Model composition").
#pragma once

#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "model/model_config.h"

namespace detinfer::model {

// The Gemma-only fields (activation, soft-capping, query_pre_attn_scalar, norms,
// embedding scale, local RoPE base). `j` is the raw object: null and absent differ for
// the soft-capping fields (null = no capping, absent = the architecture's default).
void parse_gemma_fields(const nlohmann::json& j, core::ObjectReader& f, ModelConfig& c);

// sliding_window and which layers use it (ModelConfig::sliding_layers), for every
// architecture: Mistral / Phi-3 sliding_window (all layers), Qwen2 / Qwen3
// use_sliding_window + max_window_layers or layer_types, Gemma 2 (even layers), Gemma 3
// (layer_types or sliding_window_pattern). Window <= 0 is Error(kCorrupt).
void parse_sliding_layers(core::ObjectReader& f, ModelConfig& c);

// The lines canonical_config_text adds for these fields (nothing for a config without
// them, so the other architectures' texts keep their bytes).
std::string gemma_config_text(const ModelConfig& c);

// Gemma's embedding normalizer: sqrt(hidden_size) rounded to binary32, then to the
// embedding table's dtype (transformers: torch.tensor(hidden_size**0.5, dtype)). Both
// numerics modes multiply the embedding rows by it.
float gemma_embed_scale(std::int64_t hidden_size, core::DType embed_dtype);

}  // namespace detinfer::model
