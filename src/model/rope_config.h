// config.json's rope_scaling: parsing, validation and its lines of the canonical config
// text (model_config.cpp uses both). docs/numerics.md, "RoPE table", defines each type.
#pragma once

#include <ostream>
#include <string>

#include "core/json_fields.h"
#include "model/model_config.h"

namespace detinfer::model {

// Reads rope_scaling from the config object `f` into c.rope_scaling. `c` must hold
// architecture, max_position_embeddings, head_dim and partial_rotary_dim already. A type detinfer
// does not implement is Error(kUnsupported); a malformed value Error(kCorrupt) naming the field.
// longrope caps c.max_position_embeddings at original_max_position_embeddings (its canonical rule).
void parse_rope_scaling(core::ObjectReader& f, ModelConfig& c);

// A double's exact bit pattern as 16 hex digits (canonical_config_text's floats).
std::string hex_bits(double d);

// The rope_scaling lines of canonical_config_text (unchanged for configs without scaling
// and for llama3, so their model fingerprints keep their bytes).
void write_rope_scaling(std::ostream& os, const RopeScaling& s);

}  // namespace detinfer::model
