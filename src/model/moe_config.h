// config.json's mixture-of-experts fields (Qwen3-MoE, Mixtral, Qwen2-MoE): parsing, validation and
// their lines of the canonical config text (model_config.cpp uses both). docs/numerics.md,
// "Mixture of experts", defines the block.
#pragma once

#include <ostream>

#include "core/json_fields.h"
#include "model/model_config.h"

namespace detinfer::model {

// Whether `a` is a mixture-of-experts architecture.
bool is_moe_architecture(Architecture a);

// Reads the MoE fields of a MoE architecture from the config object `f` into c.moe (a
// no-op for dense architectures). `c` must hold architecture, num_layers and
// intermediate_size already. Zero experts, top-k outside [1, num_experts], an
// mlp_only_layers entry outside [0, num_hidden_layers) and the like are Error(kCorrupt)
// naming the field; a shared expert outside Qwen2-MoE is Error(kUnsupported).
void parse_moe_config(core::ObjectReader& f, ModelConfig& c);

// The MoE lines of canonical_config_text, written only for MoE architectures (so that the
// dense architectures' texts, and their model fingerprints, keep their bytes).
void write_moe_config(std::ostream& os, const MoeConfig& moe);

}  // namespace detinfer::model
