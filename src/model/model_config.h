// Parsed config.json of a supported architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace detinfer::model {

enum class Architecture : std::uint8_t {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kOlmo2,
  kPhi3,
  // Gemma 2 / Gemma 3 text (issue 29).
  kGemma2,
  kGemma3,
  // Mixture of experts (ModelConfig::moe).
  kQwen3Moe,
  kMixtral,
  kQwen2Moe,  // with a shared expert (MoeConfig::shared_intermediate_size)
};
const char* to_string(Architecture a);  // the Hugging Face class name

// config.json's rope_scaling (docs/numerics.md, "RoPE table"; transformers'
// modeling_rope_utils). Each type reads the members its comment names.
struct RopeScaling {
  // "" (none, also "default"), "linear", "dynamic", "llama3", "yarn" or "longrope".
  std::string type;
  double factor = 1.0;            // linear, dynamic, llama3, yarn, longrope
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  // llama3, yarn, longrope (yarn and longrope: config.json's max_position_embeddings when
  // the config does not give it).
  std::int64_t original_max_position_embeddings = 8192;
  double beta_fast = 32.0;      // yarn
  double beta_slow = 1.0;       // yarn
  double mscale = 0.0;          // yarn: 0 = absent
  double mscale_all_dim = 0.0;  // yarn: 0 = absent
  bool truncate = true;         // yarn: floor/ceil the correction range
  // yarn, longrope: the factor cos and sin are multiplied by; 0 = derived from the others.
  double attention_factor = 0.0;
  std::vector<double> short_factor;  // longrope: head_dim / 2 entries
  std::vector<double> long_factor;   // longrope: head_dim / 2 entries (validated, unused)
};

// Where a layer's q/k RMSNorm applies (docs/numerics.md, "Model composition").
enum class QkNorm : std::uint8_t {
  kNone = 0,
  kPerHead = 1,    // Qwen3: one head_dim vector per head, weights of head_dim
  kFullWidth = 2,  // OLMo 2: the whole projection, weights of num_heads * head_dim
};

// Where a layer's two RMSNorms sit (docs/numerics.md, "Model composition").
enum class NormPlacement : std::uint8_t {
  kPre,   // input_layernorm / post_attention_layernorm on each sublayer's input
  kPost,  // OLMo 2: post_attention_layernorm / post_feedforward_layernorm on each
          // sublayer's output, before the residual add; no norm on the inputs
  // Gemma 2 / 3: both: input_layernorm / pre_feedforward_layernorm on each sublayer's
  // input and post_attention_layernorm / post_feedforward_layernorm on its output.
  kSandwich,
};

// The MLP's gate activation (config.json's hidden_act / hidden_activation).
enum class Activation : std::uint8_t {
  kSilu,      // silu(gate) * up
  kGeluTanh,  // Gemma: gelu_pytorch_tanh(gate) * up (docs/numerics.md "tanh")
};

// A mixture-of-experts MLP (Qwen3-MoE, Mixtral, Qwen2-MoE; docs/numerics.md, "Mixture of
// experts").
struct MoeConfig {
  std::int64_t num_experts = 0;        // 0: a dense model (every other member unused)
  std::int64_t experts_per_tok = 0;    // top-k, in [1, num_experts]
  std::int64_t intermediate_size = 0;  // each expert's (moe_intermediate_size; Mixtral:
                                       // intermediate_size)
  bool norm_topk_prob = false;         // renormalize the k weights (Mixtral: always)
  // Qwen2-MoE: the shared expert's width (shared_expert_intermediate_size), whose output is
  // added to every row through a sigmoid gate; 0 = no shared expert.
  std::int64_t shared_intermediate_size = 0;
  // Per layer: 1 = the MLP is the sparse block, 0 = a dense MLP of the model's
  // intermediate_size (Qwen3-MoE's mlp_only_layers / decoder_sparse_step).
  std::vector<std::uint8_t> sparse_layers;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  // The leading dimensions of each head that RoPE rotates, int(head_dim *
  // partial_rotary_factor) (Phi-3 / Phi-4-mini); 0 = all of them. See rope_dims().
  std::int64_t partial_rotary_dim = 0;
  // The context limit detinfer enforces: config.json's value (sliding windows are masked
  // exactly, so they no longer cap it; canonical_config_text still writes the capped value
  // for the architectures that had it, so their fingerprints keep their bytes).
  std::int64_t max_position_embeddings = 0;
  // Keys a windowed layer sees: row at position p sees (p - sliding_window, p], the
  // sliding_window most recent keys including its own (transformers' masking_utils). 0 =
  // no window. Which layers are windowed: sliding_layers.
  std::int64_t sliding_window = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  QkNorm qk_norm = QkNorm::kNone;
  NormPlacement norm_placement = NormPlacement::kPre;
  // Phi-3: one qkv_proj ([q | k | v] rows) and one gate_up_proj ([gate | up] rows) per
  // layer instead of q/k/v_proj and gate/up_proj; split by rows at load.
  bool fused_projections = false;
  MoeConfig moe;  // num_experts 0 unless the architecture is a mixture of experts
  core::DType weight_dtype = core::DType::kF32;
  std::vector<std::int32_t> bos_token_ids;
  std::vector<std::int32_t> eos_token_ids;  // config.json / generation_config.json

  // --- sliding windows per layer, Gemma 2 / Gemma 3 (issue 29; docs/numerics.md "Model
  // composition") ---
  // One entry per layer, 1 = the layer attends through sliding_window; empty when
  // sliding_window is 0. Mistral / Phi-3: every layer; Qwen2 / Qwen3: layers >=
  // max_window_layers (or layer_types); Gemma 2: even layers; Gemma 3: layer_types or
  // (i + 1) % sliding_window_pattern != 0.
  std::vector<std::uint8_t> sliding_layers;
  Activation hidden_act = Activation::kSilu;
  // Gemma: every RMSNorm weight w (layers, q/k norms, final norm) is applied as
  // float(1 + w) (rounded once to binary32 at load).
  bool norm_plus_one = false;
  // Gemma: the embedding rows are multiplied by sqrt(hidden_size) rounded to the embedding
  // table's dtype (transformers' normalizer).
  bool scale_embeddings = false;
  double attn_logit_softcapping = 0.0;   // > 0: scores become tanh(s / c) * c (Gemma 2)
  double final_logit_softcapping = 0.0;  // > 0: logits become tanh(l / c) * c (Gemma 2)
  // > 0: the attention scale is query_pre_attn_scalar^-0.5 instead of head_dim^-0.5.
  double query_pre_attn_scalar = 0.0;
  // > 0 (Gemma 3): the RoPE base of the windowed layers (rope_local_base_freq), with no
  // rope_scaling; the other layers use rope_theta and rope_scaling.
  double rope_local_theta = 0.0;
};

// Whether layer `layer` attends through the sliding window.
inline bool layer_is_sliding(const ModelConfig& c, std::int64_t layer) {
  return c.sliding_window > 0 && static_cast<std::size_t>(layer) < c.sliding_layers.size() &&
         c.sliding_layers[static_cast<std::size_t>(layer)] != 0;
}

// The keys any layer can still see (docs/session.md, "Sliding windows and the KV cache"):
// when every layer attends through the sliding window, a row at position p >= next_pos
// sees no key below next_pos + 1 - sliding_window, so the KV blocks wholly before it are
// dead; this returns sliding_window then. 0 when any layer attends to every key.
inline std::int64_t kv_horizon(const ModelConfig& c) {
  if (c.sliding_window <= 0 || c.num_layers <= 0) return 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (!layer_is_sliding(c, l)) return 0;
  }
  return c.sliding_window;
}

// The first block of a sequence's table that rows at positions >= next_pos can read with
// keys horizon (kv_horizon): the blocks before it hold only keys below
// next_pos + 1 - horizon. 0 when horizon is 0 (every block stays live).
inline std::int64_t first_live_block(std::int64_t horizon, std::int64_t next_pos,
                                     std::int64_t block_size) {
  if (horizon <= 0 || next_pos + 1 - horizon <= 0) return 0;
  return (next_pos + 1 - horizon) / block_size;
}

// The dimensions of each head RoPE rotates (the rest pass through unchanged).
inline std::int64_t rope_dims(const ModelConfig& c) {
  return c.partial_rotary_dim > 0 ? c.partial_rotary_dim : c.head_dim;
}

// Whether layer l's MLP is the mixture-of-experts block.
inline bool is_moe_layer(const ModelConfig& c, std::int64_t l) {
  return c.moe.num_experts > 0 && c.moe.sparse_layers.at(static_cast<std::size_t>(l)) != 0;
}

// Parses config.json (and generation_config.json, which overrides bos/eos, when
// generation_json is non-empty). Validates every field; unknown architectures and
// unsupported features (other rope scalings, biases on o_proj, non-silu activations,
// quantization) are Error(kUnsupported); malformed values are Error(kCorrupt) naming
// `where` and the field. weight_dtype is left kF32: the loader sets it from the tensors.
ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& where);
// Reads <dir>/config.json and, when present, <dir>/generation_config.json.
ModelConfig load_model_config(const std::string& dir);

// The canonical rendering of the fields that affect computation (and bos/eos), hashed
// into the model fingerprint (docs/fingerprint-model.md). One "key=value\n" per field in
// a fixed order; floating-point values as exact hex bit patterns.
std::string canonical_config_text(const ModelConfig& config);

}  // namespace detinfer::model
