// Developer tools behind the `detinfer make-tiny-model` and `detinfer logits` commands
// (detinfer_devtools, not part of libdetinfer): a deterministic random-model generator
// (tests and the demo use it; no model is ever downloaded) and a one-shot logits dump.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "detinfer/numerics.h"
#include "kernels/quant.h"
#include "model/quant_scheme.h"

namespace detinfer::devtools {

enum class TinyArch : std::uint8_t {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kOlmo2,
  kPhi3,
  kGemma2,  // issue 29
  kGemma3,
  kQwen3Moe,  // mixture of experts (num_experts, experts_per_tok below)
  kMixtral,
  kQwen2Moe,  // with a shared expert (shared_expert_intermediate below)
};

// Parses "llama" | "mistral" | "qwen2" | "qwen3" | "olmo2" | "phi3" | "gemma2" | "gemma3" |
// "qwen3_moe" | "mixtral" | "qwen2_moe" and "f32" | "bf16" | "f16"; Error(kInvalidArgument)
// otherwise.
TinyArch parse_tiny_arch(const std::string& name);
const char* tiny_arch_name(TinyArch arch);  // the inverse: "llama", ..., "qwen2_moe"
core::DType parse_weight_dtype(const std::string& name);

// How a mixture-of-experts model's experts are stored (model/fused_experts.h).
enum class FusedExperts : std::uint8_t {
  kNone,      // one 2-D tensor per expert and projection, as the published checkpoints
  kGateUp,    // transformers v5: mlp.experts.gate_up_proj [E, 2 * inter, hidden] + down_proj
  kSeparate,  // 3-D mlp.experts.gate_proj / up_proj [E, inter, hidden] + down_proj
};
// "none" | "gate_up" | "separate"; Error(kInvalidArgument) otherwise.
FusedExperts parse_fused_experts(const std::string& name);

// Rewrites the mixture-of-experts folder `dir` (one model.safetensors, experts stored per
// expert) with every sparse layer's experts fused as `layout` (kNone: unchanged), the same
// bytes in the order transformers v5's conversion_mapping.py stacks them, Mixtral's router
// renamed mlp.gate.weight as transformers v5 names it. Error(kInvalidArgument) for a dense
// or sharded folder. Tests and demos only (the tensors are held in memory).
void fuse_expert_tensors(const std::string& dir, FusedExperts layout);

struct TinyModelOptions {
  TinyArch arch = TinyArch::kLlama;
  core::DType dtype = core::DType::kF32;
  std::int64_t hidden = 64;           // hidden_size
  std::int64_t intermediate = 128;    // intermediate_size
  std::int64_t layers = 2;            // num_hidden_layers
  std::int64_t heads = 4;             // num_attention_heads
  std::int64_t kv_heads = 2;          // num_key_value_heads (GQA when < heads)
  std::int64_t head_dim = 0;          // 0 = hidden / heads; written to config.json for qwen3
  std::int64_t vocab = 512;           // vocab_size; >= 259 also writes a tokenizer.json
  std::int64_t max_positions = 2048;  // max_position_embeddings
  double rope_theta = 10000.0;
  bool llama3_rope_scaling = false;  // llama only: rope_scaling {rope_type: llama3, factor 8}
  // mistral, phi3, gemma2, gemma3 (qwen2 / qwen3 with max_window_layers 0): 0 = null
  // (gemma: 0 writes Gemma's default 4096).
  std::int64_t sliding_window = 0;
  double partial_rotary_factor = 1.0;  // phi3 only: written to config.json when not 1
  bool tie_word_embeddings = false;
  double rms_norm_eps = 1e-5;
  // qwen3_moe, mixtral: the sparse MLP (Qwen3-MoE's experts have moe_intermediate of width;
  // Mixtral's have `intermediate`).
  std::int64_t num_experts = 8;
  std::int64_t experts_per_tok = 2;
  std::int64_t moe_intermediate = 32;
  bool norm_topk_prob = true;                    // qwen3_moe only (Mixtral always normalizes)
  std::vector<std::int64_t> mlp_only_layers;     // qwen3_moe, qwen2_moe: dense layers
  std::int64_t shared_expert_intermediate = 48;  // qwen2_moe only

  // MoE, one shard: the experts stored fused (fuse_expert_tensors), as transformers v5 does.
  FusedExperts fused_experts = FusedExperts::kNone;

  std::int64_t shards = 1;  // > 1 writes model-0000N-of-0000M.safetensors + index
  std::uint64_t seed = 0;
  // gemma2 / gemma3 (issue 29): soft-caps (0 = null), query_pre_attn_scalar (0 = head_dim),
  // gemma3's rope_local_base_freq, sliding_window_pattern and linear rope_scaling factor
  // (1 = none). Norm weights are drawn around 0 (applied as 1 + w).
  double attn_logit_softcapping = 0.0;
  double final_logit_softcapping = 0.0;
  double query_pre_attn_scalar = 0.0;
  double rope_local_base_freq = 10000.0;
  std::int64_t sliding_window_pattern = 2;
  double linear_rope_factor = 1.0;
  std::string out_dir;  // created if missing; existing model files are overwritten
};

// Writes config.json, generation_config.json, model.safetensors (or shards + index) and,
// when vocab >= 259, tokenizer.json + tokenizer_config.json (detinfer's tiny byte-level
// BPE) into out_dir. Weights are Philox draws keyed by (seed, tensor index, element),
// uniform in +-sqrt(3 / fan_in) (norm weights 1 +- 0.1, biases +-0.1), so activations
// stay O(1). The same options give the same bytes on every machine.
void make_tiny_model(const TinyModelOptions& options);

// Writes the Hugging Face model folder `hf_dir` (f32, bf16 or f16 safetensors; llama,
// mistral, qwen2, qwen3, olmo2, phi3, gemma2, gemma3, qwen3_moe, mixtral or qwen2_moe; no
// rope scaling, linear, or phi3's longrope) as GGUF the way llama.cpp's converter does: its
// tensor names and metadata keys, the tensors in their stored type, llama / Mixtral Q/K
// rows permuted, phi3's longrope factors as F32 tensors, Gemma's norms as 1 + w, the
// experts stacked into 3-D tensors (docs/gguf.md). `splits` > 1 writes out_path's stem +
// -0000N-of-0000M.gguf shards (split.no / split.count / split.tensors.count, as gguf-split writes
// them). Returns the files written. Tests and demos only.
std::vector<std::string> write_gguf_model(const std::string& hf_dir, const std::string& out_path,
                                          std::int64_t splits = 1);

struct GgufConvertOptions {
  std::int64_t splits = 1;
  // Store the 2-D weights in the format this scheme picks for each (one format, or a
  // llama.cpp mix such as q4_k_m: model::scheme_format_for), quantized from their f32 values
  // by kernels::quantize_rows (quantized spec v1: the blocks SessionOptions::weights makes on
  // load); a tensor whose rows are not whole blocks stays as stored; nullopt = as stored.
  std::optional<model::QuantScheme> quantize;
  // Quantize token_embd.weight too (llama.cpp does); false keeps it as stored.
  bool quantize_token_embd = true;
  // Write the folder's tokenizer.json + tokenizer_config.json as tokenizer metadata (with
  // the chat template; the tokenizer.ggml.pre name that stands for its pre-tokenizer) and
  // generation_config.json's sampling fields as general.sampling.*.
  bool tokenizer = true;
};
std::vector<std::string> write_gguf_model(const std::string& hf_dir, const std::string& out_path,
                                          const GgufConvertOptions& options);

struct LogitsRequest {
  std::string model_dir;
  std::vector<std::int32_t> tokens;  // the prompt: positions 0..T-1
  NumericsMode mode = NumericsMode::kCanonical;
  int threads = 1;
  std::optional<model::QuantScheme> weights{};  // ModelOptions::weights (quantize on load)
};

struct LogitsResult {
  std::int64_t num_tokens = 0;
  std::int64_t vocab_size = 0;
  std::vector<float> logits;      // [num_tokens][vocab_size], row t = logits after token t
  std::string model_fingerprint;  // 32 hex digits (docs/fingerprint-model.md)
};

// Loads the model and runs one prefill over all tokens, returning every position's logits.
LogitsResult compute_logits(const LogitsRequest& request);

}  // namespace detinfer::devtools
