// detinfer::devtools::write_gguf_model: a Hugging Face folder as a GGUF file (model_tools.h).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/json_parse.h"
#include "devtools/gguf_convert_families.h"
#include "devtools/gguf_tokenizer_writer.h"
#include "devtools/gguf_writer.h"
#include "devtools/model_tools.h"
#include "kernels/quant.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "model/quant_scheme.h"
#include "model/rope_table.h"
#include "model/tensor_store.h"
#include "model/weight_loader.h"

namespace detinfer::devtools {
namespace {

// A tensor written beside the model's weights (name, ggml dims, F32 bytes).
struct ExtraTensor {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::vector<std::uint8_t> bytes;
};

using model::Architecture;

const char* gguf_arch(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
    case Architecture::kMistral:  // llama.cpp writes Mistral models as llama
    case Architecture::kMixtral:  // and Mixtral's, with llama.expert_count
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kOlmo2:
      return "olmo2";
    case Architecture::kPhi3:
      return "phi3";
    case Architecture::kGemma2:
      return "gemma2";
    case Architecture::kGemma3:
      return "gemma3";
    case Architecture::kQwen3Moe:
      return "qwen3moe";
    case Architecture::kQwen2Moe:
      return "qwen2moe";
  }
  fail(ErrorCode::kUnsupported, "write_gguf_model: ", model::to_string(a),
       " is not written as GGUF");
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

// general.file_type as llama.cpp numbers it: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32, a
// quantized file model::gguf_file_type (MOSTLY_Q8_0 7, MOSTLY_Q4_K_M 15, ...).
std::uint32_t file_type_of(core::DType d, const std::optional<model::QuantScheme>& q) {
  if (q) return model::gguf_file_type(*q);
  return d == core::DType::kF32 ? 0 : d == core::DType::kF16 ? 1 : 32;
}

std::string read_if_present(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return {};
  return core::read_file_bounded(p.string(), std::size_t{1} << 30, p.filename().string());
}

// The folder's tokenizer.json (+ tokenizer_config.json: special tokens, chat template) as
// tokenizer metadata with the config's BOS and stop ids, and the first tokenizer.ggml.pre
// name (table order) that stands for its normalizer and pre-tokenizer; the first refusal
// when none does. False when the folder has no tokenizer.json.
bool add_folder_tokenizer(GgufWriter& w, const std::string& dir, const model::ModelConfig& c) {
  const std::string json = read_if_present(std::filesystem::path(dir) / "tokenizer.json");
  if (json.empty()) return false;
  std::string cfg = read_if_present(std::filesystem::path(dir) / "tokenizer_config.json");
  // chat_template.jinja, where present, is the template (as for the folder itself).
  const std::string jinja = read_if_present(std::filesystem::path(dir) / "chat_template.jinja");
  if (!jinja.empty()) {
    nlohmann::ordered_json j =
        cfg.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(cfg);
    j["chat_template"] = jinja;
    cfg = j.dump();
  }
  GgufTokenizerSource src{json, cfg, ""};
  if (!c.bos_token_ids.empty()) src.bos_token_id = c.bos_token_ids[0];
  src.eos_token_ids = c.eos_token_ids;
  std::optional<Error> first;
  for (const std::string& pre : model::gguf_pre_tokenizer_names()) {
    src.pre = pre;
    try {
      GgufWriter trial;
      add_gguf_tokenizer(trial, src);
    } catch (const Error& e) {
      if (!first) first = e;
      continue;
    }
    add_gguf_tokenizer(w, src);
    return true;
  }
  throw *first;
}

// generation_config.json's sampling fields as general.sampling.* (llama.cpp's keys).
void add_sampling_defaults(GgufWriter& w, const std::string& dir) {
  const std::string text = read_if_present(std::filesystem::path(dir) / "generation_config.json");
  if (text.empty()) return;
  const nlohmann::json g = nlohmann::json::parse(text);
  for (const auto& [field, key] : {std::pair<const char*, const char*>{"temperature", "temp"},
                                   {"top_p", "top_p"},
                                   {"min_p", "min_p"},
                                   {"repetition_penalty", "penalty_repeat"}}) {
    if (g.contains(field) && g[field].is_number()) {
      w.add_f32(std::string("general.sampling.") + key, g[field].get<float>());
    }
  }
  if (g.contains("top_k") && g["top_k"].is_number_integer()) {
    w.add_i32("general.sampling.top_k", g["top_k"].get<std::int32_t>());
  }
}

// phi3's keys as llama.cpp's Phi3MiniModel writes them: context_length is config.json's
// max_position_embeddings (not the context limit detinfer derives from it),
// rope.dimension_count the rotated dimensions, the original context length always, the
// sliding window always (0 = none), and for longrope the attention factor (the
// factors are tensors: rope_factor_tensors).
void add_phi3_metadata(GgufWriter& w, const model::ModelConfig& c, const std::string& dir) {
  const nlohmann::json raw =
      nlohmann::json::parse(read_if_present(std::filesystem::path(dir) / "config.json"));
  w.add_u32("phi3.context_length", raw.at("max_position_embeddings").get<std::uint32_t>());
  w.add_u32("phi3.rope.dimension_count", static_cast<std::uint32_t>(model::rope_dims(c)));
  std::uint32_t original = 4096;  // Phi3Config's default
  if (c.rope_scaling.type == "longrope") {
    original = static_cast<std::uint32_t>(c.rope_scaling.original_max_position_embeddings);
    // The factor cos and sin get (llama.cpp derives it from the context ratio; the
    // config's own attention_factor, where given, is written instead so that the file
    // computes what the folder does).
    w.add_f32("phi3.rope.scaling.attn_factor",
              static_cast<float>(model::RopeTable(c).attention_factor()));
  } else if (raw.contains("original_max_position_embeddings")) {
    original = raw["original_max_position_embeddings"].get<std::uint32_t>();
  }
  w.add_u32("phi3.rope.scaling.original_context_length", original);
  w.add_u32("phi3.attention.sliding_window", static_cast<std::uint32_t>(c.sliding_window));
}

void add_metadata(GgufWriter& w, const model::ModelConfig& c, core::DType dtype,
                  const std::string& dir, const GgufConvertOptions& o) {
  const std::string a = gguf_arch(c.architecture);
  w.add_string("general.architecture", a);
  w.add_string("general.type", "model");
  w.add_string("general.name", "detinfer tiny model (" + dir + ")");
  w.add_u32("general.file_type", file_type_of(dtype, o.quantize));
  w.add_u32(a + ".block_count", static_cast<std::uint32_t>(c.num_layers));
  if (c.architecture == Architecture::kPhi3) {
    add_phi3_metadata(w, c, dir);
  } else {
    w.add_u32(a + ".context_length", static_cast<std::uint32_t>(c.max_position_embeddings));
  }
  w.add_u32(a + ".embedding_length", static_cast<std::uint32_t>(c.hidden_size));
  w.add_u32(a + ".feed_forward_length", static_cast<std::uint32_t>(c.intermediate_size));
  w.add_u32(a + ".attention.head_count", static_cast<std::uint32_t>(c.num_heads));
  w.add_u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(c.num_kv_heads));
  w.add_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  const bool gemma =
      c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3;
  if (c.head_dim * c.num_heads != c.hidden_size || c.architecture == Architecture::kQwen3 ||
      gemma) {
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
  } else if (!c.rope_scaling.type.empty() &&
             !(c.rope_scaling.type == "longrope" && c.architecture == Architecture::kPhi3)) {
    fail(ErrorCode::kUnsupported, "write_gguf_model: rope_scaling ", c.rope_scaling.type,
         " is not written");
  }
  gguf_families::add_metadata(w, c, a);
  if (o.tokenizer && add_folder_tokenizer(w, dir, c)) {
    add_sampling_defaults(w, dir);
    return;  // the ids below are written with the tokenizer
  }
  add_sampling_defaults(w, dir);
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

// The bytes of `spec`'s tensor as the converter stores them: as in the folder (1-D tensors
// as F32), or quantized (2-D tensors of whole blocks: rows widened to f32,
// kernels::quantize_rows), with llama Q/K rows permuted; `type` gets its ggml type.
std::vector<std::uint8_t> stored_bytes(const model::TensorRef& t, const model::WeightSpec& spec,
                                       const model::ModelConfig& c, const GgufConvertOptions& o,
                                       std::uint32_t& type) {
  std::vector<std::uint8_t> out(t.data(), t.data() + static_cast<std::size_t>(t.info->size()));
  type = ggml_type_of(t.info->dtype);
  if (gguf_families::stored_as_f32(spec)) {
    // 1-D tensors (norms, biases) and routers as F32, widened exactly, as llama.cpp's
    // converter writes them (its CPU ops take no bf16/f16 norm weights); Gemma's norms as
    // 1 + w.
    const std::int64_t n =
        static_cast<std::int64_t>(t.info->size() / core::dtype_size(t.info->dtype));
    std::vector<float> f(static_cast<std::size_t>(n));
    model::widen_to_f32(t.info->dtype, t.data(), n, f.data());
    if (c.norm_plus_one && model::is_norm_kind(spec.kind)) gguf_families::add_one(t.info->dtype, f);
    out.resize(f.size() * sizeof(float));
    std::memcpy(out.data(), f.data(), out.size());
    type = ggml_type_of(core::DType::kF32);
  }
  const bool embed = spec.kind == model::WeightKind::kEmbed;
  const std::optional<kernels::QuantFormat> q =
      o.quantize ? model::scheme_format_for(*o.quantize, spec, c) : std::nullopt;
  if (q && spec.shape[1] % kernels::quant_format_info(*q).block_elems == 0 &&
      (!embed || o.quantize_token_embd)) {
    const std::int64_t rows = spec.shape[0], k = spec.shape[1];
    std::vector<float> f(static_cast<std::size_t>(rows * k));
    model::widen_to_f32(t.info->dtype, t.data(), rows * k, f.data());
    out.assign(static_cast<std::size_t>(rows * kernels::quant_row_bytes(*q, k)), 0);
    kernels::quantize_rows(*q, f.data(), rows, k, out.data());
    type = model::ggml_type_of(*q);
  }
  const bool llama = c.architecture == Architecture::kLlama ||
                     c.architecture == Architecture::kMistral ||
                     c.architecture == Architecture::kMixtral;
  if (!llama || (spec.kind != model::WeightKind::kQ && spec.kind != model::WeightKind::kK)) {
    return out;
  }
  const std::int64_t heads = spec.kind == model::WeightKind::kQ ? c.num_heads : c.num_kv_heads;
  const std::vector<std::int64_t> order = model::llama_qk_row_order(heads, c.head_dim);
  const std::vector<std::uint8_t> hf = out;
  const std::size_t row = hf.size() / order.size();
  for (std::size_t r = 0; r < order.size(); ++r) {  // stored row order[r] = HF row r
    std::memcpy(out.data() + static_cast<std::size_t>(order[r]) * row, hf.data() + r * row, row);
  }
  return out;
}

// phi3 longrope: the factors as the F32 tensors rope_factors_long.weight and
// rope_factors_short.weight (llama.cpp's generate_extra_tensors). GGUF stores them as
// f32: factors that are not f32 values are rounded (as in llama.cpp's files).
std::vector<ExtraTensor> rope_factor_tensors(const model::ModelConfig& c) {
  std::vector<ExtraTensor> out;
  if (c.architecture != Architecture::kPhi3 || c.rope_scaling.type != "longrope") return out;
  for (const auto* list : {&c.rope_scaling.long_factor, &c.rope_scaling.short_factor}) {
    ExtraTensor t;
    t.name = list == &c.rope_scaling.long_factor ? "rope_factors_long.weight"
                                                 : "rope_factors_short.weight";
    t.dims = {static_cast<std::uint64_t>(list->size())};
    t.bytes.resize(list->size() * sizeof(float));
    for (std::size_t i = 0; i < list->size(); ++i) {
      const auto v = static_cast<float>((*list)[i]);
      std::memcpy(t.bytes.data() + i * sizeof v, &v, sizeof v);
    }
    out.push_back(std::move(t));
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
  GgufConvertOptions o;
  o.splits = splits;
  return write_gguf_model(hf_dir, out_path, o);
}

std::vector<std::string> write_gguf_model(const std::string& hf_dir, const std::string& out_path,
                                          const GgufConvertOptions& o) {
  const model::ModelConfig c = model::load_model_config(hf_dir);
  const model::TensorStore store = model::TensorStore::open(hf_dir);
  const std::vector<model::WeightSpec> specs = model::required_weights(c);
  std::vector<ExtraTensor> extra = rope_factor_tensors(c);
  // One tensor per spec, the experts of a layer's projection stacked into one.
  const std::vector<std::vector<const model::WeightSpec*>> tensors =
      gguf_families::written_tensors(specs);
  const auto n = static_cast<std::int64_t>(tensors.size());
  const std::int64_t splits = o.splits;
  if (splits < 1 || splits > n) {
    fail(ErrorCode::kInvalidArgument, "write_gguf_model: splits = ", splits, " is outside [1, ", n,
         "]");
  }
  const core::DType dtype = store.get(specs.front().name).info->dtype;
  std::vector<std::string> written;
  for (std::int64_t s = 0; s < splits; ++s) {
    GgufWriter w;
    if (s == 0) add_metadata(w, c, dtype, hf_dir, o);
    if (splits > 1) {
      w.add_u32("split.no", static_cast<std::uint32_t>(s));  // llama.cpp: u16; any uint reads
      w.add_u32("split.count", static_cast<std::uint32_t>(splits));
      w.add_i32("split.tensors.count", static_cast<std::int32_t>(n + extra.size()));
    }
    for (ExtraTensor& t : extra) {  // in the first shard, before the weights
      if (s != 0) break;
      w.add_tensor(t.name, t.dims, static_cast<std::uint32_t>(model::GgmlType::kF32),
                   std::move(t.bytes));
    }
    for (std::int64_t i = s * n / splits; i < (s + 1) * n / splits; ++i) {
      const auto& parts = tensors[static_cast<std::size_t>(i)];
      std::uint32_t type = 0;
      std::vector<std::uint8_t> bytes;
      for (const model::WeightSpec* spec : parts) {  // experts: expert 0's rows first
        const std::vector<std::uint8_t> b = stored_bytes(store.get(spec->name), *spec, c, o, type);
        bytes.insert(bytes.end(), b.begin(), b.end());
      }
      w.add_tensor(model::gguf_tensor_name(parts.front()->name, c.architecture),
                   gguf_families::written_dims(parts), type, std::move(bytes));
    }
    written.push_back(splits == 1 ? out_path : split_path(out_path, s, splits));
    w.write(written.back());
  }
  return written;
}

}  // namespace detinfer::devtools
