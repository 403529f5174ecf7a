#include "devtools/gguf_convert_families.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/check.h"
#include "kernels/kernels.h"

namespace detinfer::devtools::gguf_families {
namespace {

using model::Architecture;
using model::ModelConfig;

// Gemma 3's sliding layers as {arch}.attention.sliding_window_pattern: nothing for
// llama.cpp's assumed period 6, another period p ((i + 1) % p != 0 slides), else one bool
// per layer.
void add_gemma3_pattern(GgufWriter& w, const ModelConfig& c, const std::string& key) {
  const auto n = static_cast<std::int64_t>(c.sliding_layers.size());
  for (std::int64_t p = 2; p <= n + 1; ++p) {
    bool same = true;
    for (std::int64_t i = 0; i < n; ++i) {
      same = same && ((i + 1) % p != 0) == (c.sliding_layers[static_cast<std::size_t>(i)] != 0);
    }
    if (!same) continue;
    if (p != 6) w.add_u32(key, static_cast<std::uint32_t>(p));
    return;
  }
  w.add_bool_array(key, std::vector<bool>(c.sliding_layers.begin(), c.sliding_layers.end()));
}

void add_gemma(GgufWriter& w, const ModelConfig& c, const std::string& a) {
  const bool g2 = c.architecture == Architecture::kGemma2;
  // llama.cpp derives the attention scale (gguf_families.cpp of the reader says how).
  const bool big = c.num_layers == (g2 ? 46 : 62);
  const auto derived = static_cast<double>(big ? c.hidden_size / c.num_heads : c.head_dim);
  if (c.query_pre_attn_scalar != derived) {
    fail(ErrorCode::kUnsupported, "write_gguf_model: query_pre_attn_scalar ",
         c.query_pre_attn_scalar, " is not the ", derived,
         " llama.cpp derives from the metadata (no GGUF key holds it)");
  }
  if (g2 && (c.attn_logit_softcapping <= 0.0 || c.final_logit_softcapping <= 0.0)) {
    fail(ErrorCode::kUnsupported,
         "write_gguf_model: a Gemma 2 without soft-capping has no GGUF form (llama.cpp caps)");
  }
  if (c.attn_logit_softcapping > 0.0)
    w.add_f32(a + ".attn_logit_softcapping", static_cast<float>(c.attn_logit_softcapping));
  if (c.final_logit_softcapping > 0.0)
    w.add_f32(a + ".final_logit_softcapping", static_cast<float>(c.final_logit_softcapping));
  w.add_u32(a + ".attention.sliding_window", static_cast<std::uint32_t>(c.sliding_window));
  if (g2) {
    for (std::size_t i = 0; i < c.sliding_layers.size(); ++i) {
      if ((c.sliding_layers[i] != 0) != (i % 2 == 0)) {
        fail(ErrorCode::kUnsupported,
             "write_gguf_model: Gemma 2 layers slide on even layers only in GGUF (layer ", i, ")");
      }
    }
    return;
  }
  if (c.rope_local_theta != 10000.0)  // llama.cpp's assumed local base otherwise
    w.add_f32(a + ".rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
  if (c.sliding_window > 0) add_gemma3_pattern(w, c, a + ".attention.sliding_window_pattern");
}

void add_moe(GgufWriter& w, const ModelConfig& c, const std::string& a) {
  const model::MoeConfig& m = c.moe;
  const bool mixtral = c.architecture == Architecture::kMixtral;
  const bool qwen2 = c.architecture == Architecture::kQwen2Moe;
  if (mixtral && c.sliding_window > 0) {
    fail(ErrorCode::kUnsupported,
         "write_gguf_model: a Mixtral sliding window has no key in llama.cpp's llama files");
  }
  w.add_u32(a + ".expert_count", static_cast<std::uint32_t>(m.num_experts));
  w.add_u32(a + ".expert_used_count", static_cast<std::uint32_t>(m.experts_per_tok));
  if (!mixtral) {
    w.add_u32(a + ".expert_feed_forward_length", static_cast<std::uint32_t>(m.intermediate_size));
  }
  if (qwen2) {
    w.add_u32(a + ".expert_shared_feed_forward_length",
              static_cast<std::uint32_t>(m.shared_intermediate_size));
  }
  // llama.cpp renormalizes for qwen3moe and llama, not for qwen2moe: the key only when the
  // folder says otherwise.
  if (m.norm_topk_prob == qwen2) w.add_bool(a + ".expert_weights_norm", m.norm_topk_prob);
}

}  // namespace

void add_metadata(GgufWriter& w, const ModelConfig& c, const std::string& arch) {
  if (c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3) {
    add_gemma(w, c, arch);
  }
  if (c.moe.num_experts > 0) add_moe(w, c, arch);
}

bool stored_as_f32(const model::WeightSpec& spec) {
  return spec.shape.size() == 1 || spec.kind == model::WeightKind::kRouter ||
         spec.kind == model::WeightKind::kSharedGate;
}

void add_one(core::DType folder_dtype, std::vector<float>& f) {
  for (float& x : f) {
    x = 1.0f + x;  // exact sum rounded once to binary32
    if (folder_dtype == core::DType::kF16) x = kernels::f16_to_f32(kernels::f32_to_f16_rne(x));
  }
}

std::vector<std::vector<const model::WeightSpec*>> written_tensors(
    const std::vector<model::WeightSpec>& specs) {
  std::vector<std::vector<const model::WeightSpec*>> out;
  std::map<std::pair<std::int64_t, model::WeightKind>, std::size_t> stacks;
  for (const model::WeightSpec& s : specs) {
    if (s.expert < 0) {
      out.push_back({&s});
      continue;
    }
    const auto [it, fresh] = stacks.emplace(std::make_pair(s.layer, s.kind), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(&s);
  }
  for (auto& parts : out) {
    std::sort(parts.begin(), parts.end(),
              [](const model::WeightSpec* x, const model::WeightSpec* y) {
                return x->expert < y->expert;
              });
  }
  return out;
}

std::vector<std::uint64_t> written_dims(const std::vector<const model::WeightSpec*>& parts) {
  const model::WeightSpec& s = *parts.front();
  std::vector<std::uint64_t> dims(s.shape.rbegin(), s.shape.rend());
  if (s.kind == model::WeightKind::kSharedGate) dims = {static_cast<std::uint64_t>(s.shape[1])};
  if (s.expert >= 0) dims.push_back(parts.size());
  return dims;
}

}  // namespace detinfer::devtools::gguf_families
