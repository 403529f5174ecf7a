// detinfer::devtools::write_gguf_model: a Hugging Face folder as a GGUF file (model_tools.h).
#include <cstdio>
#include <cstring>

#include "core/check.h"
#include "devtools/gguf_writer.h"
#include "devtools/model_tools.h"
#include "model/gguf_model.h"
#include "model/tensor_store.h"
#include "model/weight_loader.h"

namespace detinfer::devtools {
namespace {

using model::Architecture;

const char* gguf_arch(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
    case Architecture::kMistral:  // llama.cpp writes Mistral models as llama
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    default:
      break;
  }
  fail(ErrorCode::kUnsupported, "write_gguf_model: ", model::to_string(a),
       " is not written as GGUF (llama, mistral, qwen2, qwen3)");
}

std::uint32_t ggml_type_of(core::DType d) {
  switch (d) {
    case core::DType::kF32:
      return static_cast<std::uint32_t>(model::GgmlType::kF32);
    case core::DType::kF16:
      return static_cast<std::uint32_t>(model::GgmlType::kF16);
    case core::DType::kBF16:
      return static_cast<std::uint32_t>(model::GgmlType::kBF16);
  }
  return 0;
}

// general.file_type as llama.cpp numbers it: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32.
std::uint32_t file_type_of(core::DType d) {
  return d == core::DType::kF32 ? 0 : d == core::DType::kF16 ? 1 : 32;
}

void add_metadata(GgufWriter& w, const model::ModelConfig& c, core::DType dtype,
                  const std::string& dir) {
  const std::string a = gguf_arch(c.architecture);
  w.add_string("general.architecture", a);
  w.add_string("general.type", "model");
  w.add_string("general.name", "detinfer tiny model (" + dir + ")");
  w.add_u32("general.file_type", file_type_of(dtype));
  w.add_u32(a + ".block_count", static_cast<std::uint32_t>(c.num_layers));
  w.add_u32(a + ".context_length", static_cast<std::uint32_t>(c.max_position_embeddings));
  w.add_u32(a + ".embedding_length", static_cast<std::uint32_t>(c.hidden_size));
  w.add_u32(a + ".feed_forward_length", static_cast<std::uint32_t>(c.intermediate_size));
  w.add_u32(a + ".attention.head_count", static_cast<std::uint32_t>(c.num_heads));
  w.add_u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(c.num_kv_heads));
  w.add_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.head_dim * c.num_heads != c.hidden_size || c.architecture == Architecture::kQwen3) {
    w.add_u32(a + ".attention.key_length", static_cast<std::uint32_t>(c.head_dim));
    w.add_u32(a + ".attention.value_length", static_cast<std::uint32_t>(c.head_dim));
  }
  if (a == "llama") {
    w.add_u32(a + ".vocab_size", static_cast<std::uint32_t>(c.vocab_size));
    w.add_u32(a + ".rope.dimension_count", static_cast<std::uint32_t>(c.head_dim));
  }
  if (c.rope_scaling.type == "linear") {
    w.add_string(a + ".rope.scaling.type", "linear");
    w.add_f32(a + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  } else if (!c.rope_scaling.type.empty()) {
    fail(ErrorCode::kUnsupported, "write_gguf_model: rope_scaling ", c.rope_scaling.type,
         " is not written");
  }
  if (!c.bos_token_ids.empty()) {
    w.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(c.bos_token_ids[0]));
  }
  if (!c.eos_token_ids.empty()) {
    w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(c.eos_token_ids[0]));
  }
  if (c.eos_token_ids.size() > 1) {
    w.add_u32("tokenizer.ggml.eot_token_id", static_cast<std::uint32_t>(c.eos_token_ids[1]));
  }
}

// The bytes of `t` as the converter stores them (llama Q/K rows permuted).
std::vector<std::uint8_t> stored_bytes(const model::TensorRef& t, const model::WeightSpec& spec,
                                       const model::ModelConfig& c) {
  const std::uint8_t* src = t.data();
  const std::size_t bytes = static_cast<std::size_t>(t.info->size());
  std::vector<std::uint8_t> out(src, src + bytes);
  const bool llama =
      c.architecture == Architecture::kLlama || c.architecture == Architecture::kMistral;
  if (!llama || (spec.kind != model::WeightKind::kQ && spec.kind != model::WeightKind::kK)) {
    return out;
  }
  const std::int64_t heads = spec.kind == model::WeightKind::kQ ? c.num_heads : c.num_kv_heads;
  const std::vector<std::int64_t> order = model::llama_qk_row_order(heads, c.head_dim);
  const std::size_t row = bytes / order.size();
  for (std::size_t r = 0; r < order.size(); ++r) {  // stored row order[r] = HF row r
    std::memcpy(out.data() + static_cast<std::size_t>(order[r]) * row, src + r * row, row);
  }
  return out;
}

std::string split_path(const std::string& out, std::int64_t i, std::int64_t n) {
  const std::string stem = out.size() > 5 && out.compare(out.size() - 5, 5, ".gguf") == 0
                               ? out.substr(0, out.size() - 5)
                               : out;
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05lld-of-%05lld.gguf", static_cast<long long>(i + 1),
                static_cast<long long>(n));
  return stem + buf;
}

}  // namespace

std::vector<std::string> write_gguf_model(const std::string& hf_dir, const std::string& out_path,
                                          std::int64_t splits) {
  const model::ModelConfig c = model::load_model_config(hf_dir);
  const model::TensorStore store = model::TensorStore::open(hf_dir);
  const std::vector<model::WeightSpec> specs = model::required_weights(c);
  const auto n = static_cast<std::int64_t>(specs.size());
  if (splits < 1 || splits > n) {
    fail(ErrorCode::kInvalidArgument, "write_gguf_model: splits = ", splits, " is outside [1, ", n,
         "]");
  }
  const core::DType dtype = store.get(specs.front().name).info->dtype;
  std::vector<std::string> written;
  for (std::int64_t s = 0; s < splits; ++s) {
    GgufWriter w;
    if (s == 0) add_metadata(w, c, dtype, hf_dir);
    if (splits > 1) {
      w.add_u32("split.no", static_cast<std::uint32_t>(s));  // llama.cpp: u16; any uint reads
      w.add_u32("split.count", static_cast<std::uint32_t>(splits));
      w.add_i32("split.tensors.count", static_cast<std::int32_t>(n));
    }
    for (std::int64_t i = s * n / splits; i < (s + 1) * n / splits; ++i) {
      const model::WeightSpec& spec = specs[static_cast<std::size_t>(i)];
      const model::TensorRef& t = store.get(spec.name);
      std::vector<std::uint64_t> dims(spec.shape.rbegin(), spec.shape.rend());
      w.add_tensor(model::gguf_tensor_name(spec.name), dims, ggml_type_of(t.info->dtype),
                   stored_bytes(t, spec, c));
    }
    written.push_back(splits == 1 ? out_path : split_path(out_path, s, splits));
    w.write(written.back());
  }
  return written;
}

}  // namespace detinfer::devtools
