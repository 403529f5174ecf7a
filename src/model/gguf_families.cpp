// GGUF metadata of the Gemma and mixture-of-experts families -> ModelConfig (docs/gguf.md,
// "Gemma" and "Mixture of experts"): the keys llama.cpp's converter writes and, where it
// writes none, what llama.cpp's loader assumes.
#include <algorithm>

#include "core/check.h"
#include "model/gguf_internal.h"
#include "model/moe_config.h"

namespace detinfer::model::gguf_internal {
namespace {

constexpr std::int64_t kMaxExperts = 4096;  // as moe_config.cpp

// {arch}.attn_logit_softcapping / final_logit_softcapping: required for gemma2 (llama.cpp's
// converter always writes them; a Gemma 2 without capping has no GGUF form), optional for
// gemma3 (absent = none).
double softcap(const Meta& m, const char* k, bool required) {
  if (required) return m.number(k, 1e-6, 1e6);
  return m.number_opt(k, 1e-6, 1e6).value_or(0.0);
}

// Which layers slide: Gemma 2 every even layer (llama.cpp's swa pattern 2); Gemma 3
// {arch}.attention.sliding_window_pattern, a period p (layer i slides unless (i + 1) % p
// == 0; absent = 6, as llama.cpp assumes) or one bool per layer.
std::vector<std::uint8_t> gemma_sliding_layers(const Meta& m, const ModelConfig& c) {
  const auto n = static_cast<std::size_t>(c.num_layers);
  std::vector<std::uint8_t> out(n);
  const char* k = "attention.sliding_window_pattern";
  const GgufValue* v = c.architecture == Architecture::kGemma3 ? m.value(k) : nullptr;
  if (v != nullptr && v->type == GgufType::kArray) {
    if (v->element != GgufType::kBool || v->uints.size() != n) {
      bad(ErrorCode::kCorrupt, m.where(), m.key(k),
          str_cat("is an array of ", v->array_size(), " ", to_string(v->element), " (expected ", n,
                  " bools, one per layer)"));
    }
    for (std::size_t i = 0; i < n; ++i) out[i] = v->uints[i] != 0 ? 1 : 0;
    return out;
  }
  const std::int64_t period = c.architecture == Architecture::kGemma2 ? 2 : m.dim_or(k, 1, 1024, 6);
  for (std::size_t i = 0; i < n; ++i) out[i] = (i + 1) % period != 0 ? 1 : 0;
  return out;
}

// The sparse layers: those whose router blk.N.ffn_gate_inp.weight is present (the others
// are dense MLPs of feed_forward_length: Qwen3-MoE's mlp_only_layers).
void read_sparse_layers(const Meta& m, const GgufModel& g, ModelConfig& c) {
  c.moe.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), 0);
  bool any = false;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const bool sparse = g.find(str_cat("blk.", l, ".ffn_gate_inp.weight")).first != nullptr;
    c.moe.sparse_layers[static_cast<std::size_t>(l)] = sparse ? 1 : 0;
    any = any || sparse;
  }
  if (!any) {
    bad(ErrorCode::kCorrupt, m.where(), m.key("expert_count"),
        str_cat("= ", c.moe.num_experts,
                " but no layer has a router (blk.N.ffn_gate_inp.weight is missing)"));
  }
}

}  // namespace

void read_gemma_metadata(const Meta& m, ModelConfig& c) {
  const bool g2 = c.architecture == Architecture::kGemma2;
  if (!g2 && c.architecture != Architecture::kGemma3) return;
  c.hidden_act = Activation::kGeluTanh;
  c.norm_placement = NormPlacement::kSandwich;
  c.norm_plus_one = true;  // the stored weights are 1 + w already (GgufSource)
  c.scale_embeddings = true;
  c.attn_logit_softcapping = softcap(m, "attn_logit_softcapping", g2);
  c.final_logit_softcapping = softcap(m, "final_logit_softcapping", g2);
  // No key holds query_pre_attn_scalar: llama.cpp scales by key_length^-0.5, except for the
  // 27B models (Gemma 2: 46 layers, Gemma 3: 62), whose scalar is embedding_length /
  // head_count; so does detinfer (the converter writes the same files either way).
  const bool big = c.num_layers == (g2 ? 46 : 62);
  c.query_pre_attn_scalar = static_cast<double>(big ? c.hidden_size / c.num_heads : c.head_dim);
  if (!g2) {
    c.qk_norm = QkNorm::kPerHead;
    c.rope_local_theta = m.number_opt("rope.freq_base_swa", 1.0, 1e12).value_or(10000.0);
  }
  // llama.cpp: Gemma 2's window defaults to 4096; a Gemma 3 without one (or 0) has none.
  c.sliding_window = m.dim_or("attention.sliding_window", 0, std::int64_t{1} << 24, g2 ? 4096 : 0);
  if (c.sliding_window > 0) c.sliding_layers = gemma_sliding_layers(m, c);
  bool any = false;
  for (const std::uint8_t s : c.sliding_layers) any = any || s != 0;
  if (!any) {  // no layer slides (as parse_sliding_layers): plain causal attention
    c.sliding_window = 0;
    c.sliding_layers.clear();
  }
}

void read_moe_metadata(const Meta& m, const GgufModel& g, ModelConfig& c) {
  if (!is_moe_architecture(c.architecture)) return;
  MoeConfig& e = c.moe;
  const bool mixtral = c.architecture == Architecture::kMixtral;
  const bool qwen2 = c.architecture == Architecture::kQwen2Moe;
  e.num_experts = m.dim("expert_count", 1, kMaxExperts);
  e.experts_per_tok = m.dim("expert_used_count", 1, kMaxExperts);
  if (e.experts_per_tok > e.num_experts) {
    bad(ErrorCode::kCorrupt, m.where(), m.key("expert_used_count"),
        str_cat("= ", e.experts_per_tok, " exceeds expert_count ", e.num_experts));
  }
  // Mixtral's experts have feed_forward_length of width (llama.cpp writes no expert width);
  // without the keys llama.cpp takes feed_forward_length / expert_used_count for the
  // experts and feed_forward_length for the shared expert (the tensors' dims then decide).
  e.intermediate_size =
      mixtral ? c.intermediate_size
              : m.dim_or("expert_feed_forward_length", 1, kMaxDim,
                         std::max<std::int64_t>(1, c.intermediate_size / e.experts_per_tok));
  const char* shared = "expert_shared_feed_forward_length";
  if (qwen2) {
    e.shared_intermediate_size = m.dim_or(shared, 1, kMaxDim, c.intermediate_size);
  } else if (m.value(shared) != nullptr) {
    bad(ErrorCode::kUnsupported, m.where(), m.key(shared),
        str_cat("is present: shared experts are not supported for ", to_string(c.architecture)));
  }
  // llama.cpp renormalizes the top-k weights for qwen3moe and llama (Mixtral), not for
  // qwen2moe; {arch}.expert_weights_norm, where present, says otherwise.
  e.norm_topk_prob = m.bool_opt("expert_weights_norm").value_or(!qwen2);
  if (const auto scale = m.number_opt("expert_weights_scale", 0.0, 1e6); scale && *scale != 1.0) {
    bad(ErrorCode::kUnsupported, m.where(), m.key("expert_weights_scale"),
        str_cat("= ", *scale, ": scaled expert weights are not supported"));
  }
  if (mixtral && !e.norm_topk_prob) {
    bad(ErrorCode::kUnsupported, m.where(), m.key("expert_weights_norm"),
        "= false: Mixtral always renormalizes the top-k weights");
  }
  read_sparse_layers(m, g, c);
}

}  // namespace detinfer::model::gguf_internal
