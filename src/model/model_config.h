// Parsed config.json of a supported architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace detinfer {

enum class Architecture : std::uint8_t { kLlama, kMistral, kQwen2, kQwen3 };
const char* to_string(Architecture a);  // the Hugging Face class name

struct RopeScaling {
  std::string type;  // "" (none) or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;
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
  std::int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  bool qk_norm = false;         // per-head q_norm/k_norm (Qwen3)
  kernels::DType weight_dtype = kernels::DType::kF32;
  std::vector<std::int32_t> bos_token_ids;
  std::vector<std::int32_t> eos_token_ids;  // config.json / generation_config.json
};

}  // namespace detinfer
