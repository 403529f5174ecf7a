// write_gguf_model's parts for the Gemma and mixture-of-experts families (gguf_convert.cpp;
// docs/gguf.md, "Gemma" and "Mixture of experts"): their metadata keys, Gemma's stored
// 1 + w norms, and the experts stacked into one 3-D tensor per layer and projection, the
// way llama.cpp's converter writes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "devtools/gguf_writer.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace detinfer::devtools::gguf_families {

// The keys of a Gemma or MoE model (nothing for the others) under `arch`. What no GGUF key
// can say the way llama.cpp reads it (a Gemma 2 without soft-caps, a query_pre_attn_scalar
// other than the one llama.cpp derives, a Mixtral sliding window) is Error(kUnsupported).
void add_metadata(GgufWriter& w, const model::ModelConfig& c, const std::string& arch);

// Whether `spec`'s tensor is stored as F32 whatever the folder's dtype: 1-D tensors, the
// routers (ffn_gate_inp) and Qwen2-MoE's shared-expert gate, as llama.cpp's converter does.
bool stored_as_f32(const model::WeightSpec& spec);

// Gemma's norm weights as llama.cpp's converter stores them: 1 + w, added in f32 for f32 and
// bf16 folders (the converter widens bf16 first) and rounded to f16 for f16 folders (it adds
// in the tensor's own type), `w` widened exactly into `f`.
void add_one(core::DType folder_dtype, std::vector<float>& f);

// The tensors as written, in the order of `specs` (sorted by name): one spec each, except the
// experts of one layer and projection, which are one stacked tensor (its parts in ascending
// expert order) at the place of the first of them.
std::vector<std::vector<const model::WeightSpec*>> written_tensors(
    const std::vector<model::WeightSpec>& specs);

// The ggml dims of a written tensor of `parts`: the spec's shape reversed, the shared-expert
// gate squeezed to [hidden], stacked experts [cols, rows, experts].
std::vector<std::uint64_t> written_dims(const std::vector<const model::WeightSpec*>& parts);

}  // namespace detinfer::devtools::gguf_families
