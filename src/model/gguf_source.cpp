// GgufModel (the mapped, parsed and split-checked files of a GGUF model) and GgufSource
// (its tensors under Hugging Face names, llama Q/K rows put back in Hugging Face order).
#include <set>
#include <sstream>

#include "core/check.h"
#include "model/gguf_internal.h"
#include "model/gguf_model.h"
#include "model/rope_config.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

// Checks split.no / split.count of shard `i` of `n` (both required when n > 1).
void check_split(const GgufFile& f, std::size_t i, std::size_t n, const std::string& path) {
  const auto count = f.find_uint("split.count");
  const auto no = f.find_uint("split.no");
  if (n > 1 && !count) {
    throw Error(ErrorCode::kNotFound, path + ": GGUF split shard without 'split.count'",
                "split.count");
  }
  if (count && *count != n) {
    throw Error(ErrorCode::kCorrupt,
                str_cat(path, ": GGUF metadata 'split.count' = ", *count, " but the model has ", n,
                        " file", n == 1 ? "" : "s"),
                "split.count");
  }
  if (n > 1 && !no) {
    throw Error(ErrorCode::kNotFound, path + ": GGUF split shard without 'split.no'", "split.no");
  }
  if (no && *no != i) {
    throw Error(ErrorCode::kCorrupt,
                str_cat(path, ": GGUF metadata 'split.no' = ", *no, " but the file is shard ", i,
                        " (counting from 0)"),
                "split.no");
  }
}

// One metadata value as canonical text (floats as exact bit patterns).
void render(std::ostream& os, const GgufValue& v) {
  os << to_string(v.type) << ":";
  if (v.type == GgufType::kString) {
    os << v.s.size() << ":" << v.s;
  } else if (v.is_float()) {
    os << hex_bits(v.f);
  } else if (v.type == GgufType::kArray) {
    os << to_string(v.element) << "[" << v.array_size() << "]";
    for (const auto& s : v.strings) os << "," << s.size() << ":" << s;
    for (const auto u : v.uints) os << "," << u;
    for (const auto i : v.ints) os << "," << i;
    for (const auto d : v.floats) os << "," << hex_bits(d);
    for (const auto& a : v.arrays) render(os << ",", a);
  } else if (v.type == GgufType::kI8 || v.type == GgufType::kI16 || v.type == GgufType::kI32 ||
             v.type == GgufType::kI64) {
    os << v.i;
  } else {
    os << v.u;
  }
}

}  // namespace

std::unique_ptr<GgufModel> GgufModel::open(const std::string& path) {
  auto m = std::make_unique<GgufModel>();
  const std::vector<std::string> files = gguf_model_files(path);
  m->where_ = files.size() == 1 ? files.front() : path;
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto file = std::make_unique<MappedFile>(files[i]);
    auto parsed = std::make_unique<GgufFile>(
        parse_gguf(file->data(), static_cast<std::size_t>(file->size()), files[i]));
    check_split(*parsed, i, files.size(), files[i]);
    for (const GgufTensor& t : parsed->tensors) {
      if (!m->by_name_.emplace(t.name, std::make_pair(&t, i)).second) {
        throw Error(
            ErrorCode::kCorrupt,
            str_cat("tensor '", t.name, "' appears in more than one GGUF shard (", files[i], ")"),
            t.name);
      }
    }
    m->files_.push_back(std::move(file));
    m->parsed_.push_back(std::move(parsed));
  }
  if (const auto total = m->metadata().find_uint("split.tensors.count")) {
    if (*total != m->by_name_.size()) {
      throw Error(ErrorCode::kCorrupt,
                  str_cat(files.front(), ": GGUF metadata 'split.tensors.count' = ", *total,
                          " but the shards hold ", m->by_name_.size(), " tensors"),
                  "split.tensors.count");
    }
  }
  return m;
}

std::pair<const GgufTensor*, const MappedFile*> GgufModel::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return {nullptr, nullptr};
  return {it->second.first, files_[it->second.second].get()};
}

const std::uint8_t* GgufModel::data(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  const std::size_t i = it->second.second;
  return files_[i]->data() + parsed_[i]->data_offset + it->second.first->offset;
}

namespace gguf_internal {

TensorFormat ggml_format(std::uint32_t type) {
  TensorFormat f;
  f.ggml_type = type;
  f.name = ggml_type_name(type);
  f.is_float = true;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      f.dtype = core::DType::kF32;
      break;
    case GgmlType::kF16:
      f.dtype = core::DType::kF16;
      break;
    case GgmlType::kBF16:
      f.dtype = core::DType::kBF16;
      break;
    default:
      f.is_float = false;
  }
  return f;
}

bool source_tensor(const GgufModel& g, const std::string& name, SourceTensor& out) {
  const auto [t, file] = g.find(name);
  if (t == nullptr) return false;
  const std::size_t idx = g.tensors().at(name).second;
  out.name = name;
  out.file = file;
  out.file_offset = g.parsed(idx).data_offset + t->offset;
  out.bytes = t->bytes;
  out.shape.clear();
  for (auto d = t->dims.rbegin(); d != t->dims.rend(); ++d) {
    out.shape.push_back(static_cast<std::int64_t>(*d));
  }
  out.format = ggml_format(t->type);
  return true;
}

}  // namespace gguf_internal

GgufSource::GgufSource(const GgufModel& model, const ModelConfig& config)
    : model_(model),
      arch_(config.architecture),
      rope_factors_(config.architecture == Architecture::kPhi3 &&
                    config.rope_scaling.type == "longrope") {
  const bool llama =
      config.architecture == Architecture::kLlama || config.architecture == Architecture::kMixtral;
  for (const WeightSpec& spec : required_weights(config)) {
    const std::string name = gguf_tensor_name(spec.name, arch_);
    SourceTensor s;
    const bool found = gguf_internal::expert_source(model, spec, name, config.moe.num_experts, s) ||
                       gguf_internal::source_tensor(model, name, s);
    if (!found) continue;  // stream_weights reports it
    // Qwen2-MoE's shared-expert gate: the converter squeezes [1, hidden] to [hidden].
    if (spec.kind == WeightKind::kSharedGate && s.shape == std::vector<std::int64_t>{spec.shape[1]})
      s.shape = spec.shape;
    // Gemma: llama.cpp's converter stores every norm weight as 1 + w (in f32).
    s.norm_plus_one_applied = config.norm_plus_one && is_norm_kind(spec.kind);
    // llama.cpp's converter permutes the Q and K rows of llama-architecture models only.
    if (llama && s.shape == spec.shape) {
      if (spec.kind == WeightKind::kQ)
        s.row_order = llama_qk_row_order(config.num_heads, config.head_dim);
      if (spec.kind == WeightKind::kK) {
        s.row_order = llama_qk_row_order(config.num_kv_heads, config.head_dim);
      }
    }
    tensors_.emplace(spec.name, std::move(s));
  }
}

const SourceTensor* GgufSource::find(const WeightSpec& spec) const {
  const auto it = tensors_.find(spec.name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::string GgufSource::name_of(const WeightSpec& spec) const {
  return gguf_tensor_name(spec.name, arch_);
}

std::size_t GgufSource::count_unused(const std::vector<WeightSpec>& specs) const {
  std::set<std::string> used;  // the names read (an expert's: its stacked or own tensor)
  for (const WeightSpec& s : specs) {
    const auto it = tensors_.find(s.name);
    used.insert(it != tensors_.end() ? it->second.name : gguf_tensor_name(s.name, arch_));
  }
  if (rope_factors_) used.insert({"rope_factors_long.weight", "rope_factors_short.weight"});
  for (const auto& entry : model_.tensors()) {
    if (used.count(entry.first) == 0) {
      throw Error(ErrorCode::kUnsupported,
                  str_cat("tensor '", entry.first, "' in ", model_.where(), " is not used by a ",
                          model_.metadata().get_string("general.architecture"),
                          " model as detinfer computes it (refused rather than ignored)"),
                  entry.first);
    }
  }
  return 0;
}

std::string GgufSource::fingerprint_extra() const {
  // general.architecture and the {arch}.* keys: everything the config was read from.
  const GgufFile& f = model_.metadata();
  const std::string arch = f.get_string("general.architecture");
  std::ostringstream os;
  os << "gguf-metadata-v1\n";
  for (const auto& [key, value] : f.metadata) {
    if (key != "general.architecture" && key.compare(0, arch.size() + 1, arch + ".") != 0) {
      continue;
    }
    os << key << "=";
    render(os, value);
    os << "\n";
  }
  return os.str();
}

}  // namespace detinfer::model
