// Shared helpers of the model tests: scratch folders and tiny models.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "devtools/model_tools.h"

namespace detinfer::testing {

// A fresh folder under $DETINFER_TEST_TMP (or /tmp), unique per call.
inline std::string scratch_dir(const std::string& name) {
  const char* base = std::getenv("DETINFER_TEST_TMP");
  std::string root = base != nullptr ? base : "/tmp";
  ::mkdir(root.c_str(), 0755);
  static int counter = 0;
  const std::string dir =
      root + "/model-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + name;
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

// Relative L2 distance of a float row from a float64 one: |a - b| / |b|.
inline double rel_l2(const float* a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline devtools::TinyModelOptions tiny_options(devtools::TinyArch arch, core::DType dtype,
                                               const std::string& dir, std::uint64_t seed = 1) {
  devtools::TinyModelOptions o;
  o.arch = arch;
  o.dtype = dtype;
  o.seed = seed;
  o.out_dir = dir;
  switch (arch) {
    case devtools::TinyArch::kLlama:
      o.llama3_rope_scaling = true;
      break;
    case devtools::TinyArch::kMistral:
      o.sliding_window = 4096;  // larger than the context: full attention
      break;
    case devtools::TinyArch::kQwen2:
      o.tie_word_embeddings = true;
      o.kv_heads = 1;
      break;
    case devtools::TinyArch::kQwen3:
      o.head_dim = 32;  // heads * head_dim != hidden
      break;
    case devtools::TinyArch::kOlmo2:  // GQA (as OLMo 2 32B): q_norm and k_norm widths differ
      break;
    case devtools::TinyArch::kPhi3:
      o.partial_rotary_factor = 0.75;  // as Phi-4-mini: 12 of 16 dims rotate
      break;
    case devtools::TinyArch::kGemma2:  // Gemma 2's soft-caps, a window inside the context
    case devtools::TinyArch::kGemma3:
      o.tie_word_embeddings = true;
      o.sliding_window = 8;
      o.attn_logit_softcapping = arch == devtools::TinyArch::kGemma2 ? 50.0 : 0.0;
      o.final_logit_softcapping = arch == devtools::TinyArch::kGemma2 ? 30.0 : 0.0;
      break;
    case devtools::TinyArch::kQwen3Moe:  // 8 experts, top-2, moe_intermediate 32
      o.head_dim = 32;
      break;
    case devtools::TinyArch::kMixtral:  // 8 experts of `intermediate`, top-2
      o.intermediate = 48;
      break;
    case devtools::TinyArch::kQwen2Moe:  // q/k/v biases, a shared expert of 48, GQA 4:1
      o.kv_heads = 1;
      o.norm_topk_prob = false;  // Qwen2MoeConfig's default
      break;
  }
  return o;
}

// Deterministic pseudo-random tokens in [0, vocab).
inline std::vector<std::int32_t> test_tokens(std::size_t n, std::int64_t vocab,
                                             std::uint32_t salt = 0) {
  std::vector<std::int32_t> t(n);
  std::uint32_t s = 12345u + salt * 7919u;
  for (auto& v : t) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<std::int32_t>((s >> 8) % static_cast<std::uint32_t>(vocab));
  }
  return t;
}

}  // namespace detinfer::testing
