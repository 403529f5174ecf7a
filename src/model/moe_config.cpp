#include "model/moe_config.h"

#include <string>

#include "core/check.h"

namespace detinfer::model {
namespace {

constexpr std::int64_t kMaxExperts = 4096;
constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;

// Qwen3-MoE's layer rule (transformers' Qwen3MoeDecoderLayer): the MLP of layer l is
// sparse unless l is listed in mlp_only_layers or (l + 1) is not a multiple of
// decoder_sparse_step.
void parse_sparse_layers(core::ObjectReader& f, ModelConfig& c) {
  const std::int64_t step = f.integer_or("decoder_sparse_step", 1, 1024, 1);
  c.moe.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), 0);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    c.moe.sparse_layers[static_cast<std::size_t>(l)] = (l + 1) % step == 0 ? 1 : 0;
  }
  const nlohmann::json* only = f.optional("mlp_only_layers");
  if (only == nullptr) return;
  const std::string path = f.path_of("mlp_only_layers");
  const nlohmann::json& a = core::as_array(*only, path);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::int64_t l =
        core::as_integer(a[i], path + "[" + std::to_string(i) + "]", 0, c.num_layers - 1);
    c.moe.sparse_layers[static_cast<std::size_t>(l)] = 0;
  }
}

}  // namespace

bool is_moe_architecture(Architecture a) {
  return a == Architecture::kQwen3Moe || a == Architecture::kMixtral ||
         a == Architecture::kQwen2Moe;
}

void parse_moe_config(core::ObjectReader& f, ModelConfig& c) {
  if (!is_moe_architecture(c.architecture)) return;
  MoeConfig& m = c.moe;
  if (c.architecture == Architecture::kMixtral) {
    // MixtralConfig's defaults (8 experts, top-2); every layer is sparse, with experts of
    // intermediate_size, and the top-k weights are always renormalized.
    m.num_experts = f.integer_or("num_local_experts", 1, kMaxExperts, 8);
    m.experts_per_tok = f.integer_or("num_experts_per_tok", 1, kMaxExperts, 2);
    m.intermediate_size = c.intermediate_size;
    m.norm_topk_prob = true;
    m.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), 1);
  } else {
    // Qwen3MoeConfig's / Qwen2MoeConfig's defaults; only Qwen2-MoE has the shared expert.
    const bool qwen2 = c.architecture == Architecture::kQwen2Moe;
    if (!qwen2 && f.has("shared_expert_intermediate_size")) {
      fail(ErrorCode::kUnsupported, f.path_of("shared_expert_intermediate_size"),
           ": shared experts are not supported for ", to_string(c.architecture));
    }
    if (qwen2) {
      m.shared_intermediate_size =
          f.integer_or("shared_expert_intermediate_size", 1, kMaxDim, 5632);
    }
    m.num_experts = f.integer_or("num_experts", 1, kMaxExperts, qwen2 ? 60 : 128);
    m.experts_per_tok = f.integer_or("num_experts_per_tok", 1, kMaxExperts, qwen2 ? 4 : 8);
    m.intermediate_size = f.integer_or("moe_intermediate_size", 1, kMaxDim, qwen2 ? 1408 : 768);
    m.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
    parse_sparse_layers(f, c);
  }
  if (m.experts_per_tok > m.num_experts) {
    fail(ErrorCode::kCorrupt, f.path_of("num_experts_per_tok"), ": ", m.experts_per_tok,
         " experts per token but only ", m.num_experts, " experts");
  }
}

void write_moe_config(std::ostream& os, const MoeConfig& m) {
  if (m.num_experts == 0) return;
  std::string layers;
  for (std::size_t l = 0; l < m.sparse_layers.size(); ++l) {
    if (m.sparse_layers[l] != 0) layers += (layers.empty() ? "" : ",") + std::to_string(l);
  }
  os << "moe_num_experts=" << m.num_experts << "\n"
     << "moe_experts_per_tok=" << m.experts_per_tok << "\n"
     << "moe_intermediate_size=" << m.intermediate_size << "\n"
     << "moe_norm_topk_prob=" << (m.norm_topk_prob ? 1 : 0) << "\n"
     << "moe_sparse_layers=" << layers << "\n";
  // Qwen2-MoE only, so that the other MoE texts keep their bytes.
  if (m.shared_intermediate_size != 0)
    os << "moe_shared_intermediate_size=" << m.shared_intermediate_size << "\n";
}

}  // namespace detinfer::model
