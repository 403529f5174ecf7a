// Streams the tensors a model needs out of a TensorSource (a safetensors TensorStore or
// GGUF files), in sorted name order, into a WeightSink, hashing each one into the model fingerprint
// as it goes (one pass over the file bytes: the hash reads a tensor right after the sink copied it,
// while the pages are hot). Everything is validated before the first byte of tensor data is
// touched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/hash.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "model/model_config.h"
#include "model/safetensors_header.h"
#include "model/tensor_source.h"
#include "model/tensor_store.h"

namespace detinfer::model {

enum class WeightKind : std::uint8_t {
  kEmbed,
  kFinalNorm,
  kLmHead,
  kInputNorm,
  kPostNorm,    // post_attention_layernorm (after attention: OLMo 2; before the MLP: others)
  kPostFfNorm,  // post_feedforward_layernorm (OLMo 2)
  kQ,
  kK,
  kV,
  kO,
  kQBias,
  kKBias,
  kVBias,
  kQNorm,
  kKNorm,
  kGate,
  kUp,
  kDown,
  kQkv,        // Phi-3 qkv_proj: [q | k | v] rows
  kGateUp,     // Phi-3 gate_up_proj: [gate | up] rows
  kPreFfNorm,  // pre_feedforward_layernorm (Gemma 2 / 3: the MLP's input norm)
  // Mixture of experts (WeightSpec::expert names the expert).
  kRouter,      // [num_experts][hidden]: Qwen3-MoE mlp.gate, Mixtral block_sparse_moe.gate
  kExpertGate,  // Qwen3-MoE experts.E.gate_proj, Mixtral experts.E.w1
  kExpertUp,    // Qwen3-MoE experts.E.up_proj, Mixtral experts.E.w3
  kExpertDown,  // Qwen3-MoE experts.E.down_proj, Mixtral experts.E.w2
  // Qwen2-MoE's shared expert (mlp.shared_expert.*) and its gate (mlp.shared_expert_gate:
  // [1][hidden], a sigmoid of it scales the shared expert's output).
  kSharedGate,
  kSharedExpertGate,
  kSharedExpertUp,
  kSharedExpertDown,
};

struct WeightSpec {
  std::string name;  // Hugging Face tensor name, e.g. "model.layers.3.mlp.up_proj.weight"
  WeightKind kind = WeightKind::kEmbed;
  std::int64_t layer = -1;  // -1 for model-level tensors
  std::vector<std::int64_t> shape;
  std::int64_t expert = -1;  // the expert of kExpert* tensors, else -1
  // Set by stream_weights for the sink from SourceTensor::norm_plus_one_applied: a norm
  // weight of a norm_plus_one model (Gemma) that already holds 1 + w, to be used as it is.
  bool norm_plus_one_applied = false;
};

// Whether `kind` is an RMSNorm weight (the final norm, a layer's norms, q/k norms): the
// weights Gemma applies as (1 + w).
bool is_norm_kind(WeightKind kind);

// The tensors `config` needs, with their expected shapes, sorted by name.
std::vector<WeightSpec> required_weights(const ModelConfig& config);

// Receives each tensor once. `data` holds numel elements of `dtype`, aligned to the
// element size, valid only during the call.
class WeightSink {
 public:
  virtual ~WeightSink() = default;
  virtual void take(const WeightSpec& spec, core::DType dtype, const void* data) = 0;
  // Whether the sink takes tensors stored as `format` (asked for every tensor before any
  // data is read). Float formats go to take(); others (the quantized ggml types of GGUF
  // files: format.ggml_type) to take_encoded(). The default takes floats only, so a
  // quantized tensor is Error(kUnsupported) naming the tensor and its type.
  virtual bool accepts(const TensorFormat& format) const { return format.is_float; }
  // A tensor in a non-float format that accepts() said yes to: spec.shape[0] rows of
  // `bytes` / rows bytes each, in the model's row order, 8-byte aligned, valid only during
  // the call. The default passes the quantized formats of quantized spec v1
  // (quant_format_of) on to take_quantized and throws Error(kUnsupported) for any other.
  virtual void take_encoded(const WeightSpec& spec, const TensorFormat& format, const void* data,
                            std::uint64_t bytes);
  // An already-quantized tensor (e.g. a GGUF Q8_0 tensor): shape[0] rows of
  // kernels::quant_row_bytes(format, shape[1]) bytes in the ggml block layout, valid only
  // during the call. Default: Error(kUnsupported) naming the tensor (sinks without
  // quantized kernels).
  virtual void take_quantized(const WeightSpec& spec, kernels::QuantFormat format,
                              const void* blocks);
};

// The quantized format of quantized spec v1 (kernels/quant.h) a source format stores, if
// any: the GGUF types Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and Q2_K..Q6_K, whose block layouts are
// the spec's.
std::optional<kernels::QuantFormat> quant_format_of(const TensorFormat& format);
// The GGUF (ggml) type number of a quantized format: the inverse of quant_format_of.
std::uint32_t ggml_type_of(kernels::QuantFormat format);

struct LoadedWeights {
  Hash128 fingerprint;
  std::int64_t weight_bytes = 0;  // bytes of the tensors read, as stored
  core::DType embed_dtype = core::DType::kF32;
  double fingerprint_seconds = 0;  // time spent hashing (for the load benchmark)
};

// Checks presence, shapes of every required tensor (Error kNotFound / kCorrupt naming
// the tensor and file), then streams them into `sink`. Tensors the model does not use
// (e.g. lm_head.weight of a tied model, rotary inv_freq buffers) are skipped and not
// fingerprinted.
LoadedWeights stream_weights(const ModelConfig& config, const TensorSource& source,
                             WeightSink& sink);
LoadedWeights stream_weights(const ModelConfig& config, const TensorStore& store, WeightSink& sink);

// Widens n elements of dtype to f32 (exact).
void widen_to_f32(core::DType dtype, const void* src, std::int64_t n, float* dst);

}  // namespace detinfer::model
