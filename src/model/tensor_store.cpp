#include "model/tensor_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "core/json_parse.h"
#include "model/fused_experts.h"
#include "model/weight_loader.h"

namespace detinfer::model {
namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A shard name must be a plain file name inside the model folder.
void check_shard_name(const std::string& name, const std::string& index) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
      name.find('\0') != std::string::npos) {
    fail(ErrorCode::kCorrupt, index, ": shard name '", name, "' is not a file name");
  }
}

}  // namespace

TensorStore TensorStore::open_file(const std::string& path) {
  TensorStore s;
  s.source_ = path;
  s.add_file(path, nullptr);
  return s;
}

TensorStore TensorStore::open(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  if (!file_exists(index)) {
    const std::string single = dir + "/model.safetensors";
    if (!file_exists(single)) {
      fail(ErrorCode::kNotFound, "no model.safetensors or model.safetensors.index.json in ", dir);
    }
    return open_file(single);
  }
  const std::string text = core::read_file_bounded(index, kMaxSafetensorsHeaderBytes, index);
  core::JsonLimits limits;
  limits.max_depth = 8;  // valid: root -> weight_map / metadata -> values
  limits.max_bytes = kMaxSafetensorsHeaderBytes;
  const nlohmann::json j = core::parse_json(text, limits, ErrorCode::kCorrupt, index);
  if (!j.is_object()) fail(ErrorCode::kCorrupt, index, " is not a JSON object");
  const auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object() || wm->empty()) {
    fail(ErrorCode::kCorrupt, index, " has no 'weight_map' object");
  }
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      fail(ErrorCode::kCorrupt, index, ": weight_map['", it.key(), "'] is not a string");
    const std::string shard = it->get<std::string>();
    check_shard_name(shard, index);
    by_shard[shard].push_back(it.key());
  }
  TensorStore s;
  s.source_ = index;
  for (const auto& [shard, names] : by_shard) {
    const std::string path = dir + "/" + shard;
    if (!file_exists(path)) {
      fail(ErrorCode::kNotFound, index, " names shard ", shard, " (tensor '", names.front(),
           "') but ", path, " does not exist");
    }
    s.add_file(path, &names);
  }
  return s;
}

void TensorStore::add_file(const std::string& path, const std::vector<std::string>* only) {
  auto file = std::make_unique<MappedFile>(path);
  auto header = std::make_unique<SafetensorsHeader>(parse_safetensors_header(
      file->data(), static_cast<std::size_t>(file->size()), file->size(), path));
  std::map<std::string, const TensorInfo*> in_file;
  for (const auto& t : header->tensors) in_file[t.name] = &t;
  auto add = [&](const TensorInfo* t) {
    if (tensors_.count(t->name) != 0) {
      fail(ErrorCode::kCorrupt, "tensor '", t->name, "' appears in more than one shard (", path,
           ")");
    }
    tensors_[t->name] = TensorRef{t, file.get(), header->data_offset + t->begin};
  };
  if (only == nullptr) {
    for (const auto& [name, t] : in_file) add(t);
  } else {
    // Tensors a shard holds but the index does not map are ignored, as in transformers.
    for (const auto& name : *only) {
      const auto it = in_file.find(name);
      if (it == in_file.end()) {
        fail(ErrorCode::kNotFound, "tensor '", name, "' is mapped to ", path,
             " by the index but that shard does not contain it");
      }
      add(it->second);
    }
  }
  files_.push_back(std::move(file));
  headers_.push_back(std::move(header));
}

const TensorRef* TensorStore::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorRef& TensorStore::get(const std::string& name) const {
  const TensorRef* t = find(name);
  if (t == nullptr) fail(ErrorCode::kNotFound, "tensor '", name, "' is missing from ", source_);
  return *t;
}

std::string TensorSource::name_of(const WeightSpec& spec) const { return spec.name; }

SourceTensor as_source_tensor(const std::string& name, const TensorRef& ref) {
  SourceTensor t;
  t.name = name;
  t.file = ref.file;
  t.file_offset = ref.file_offset;
  t.bytes = ref.info->size();
  t.shape = ref.info->shape;
  t.format.dtype = ref.info->dtype;
  t.format.name = core::safetensors_name(ref.info->dtype);
  return t;
}

SafetensorsSource::SafetensorsSource(const TensorStore& store, const ModelConfig& config)
    : store_(store) {
  for (const auto& [name, ref] : store.tensors())
    tensors_.emplace(name, as_source_tensor(name, ref));
  add_fused_expert_views(config, store, views_, fused_);
}

const SourceTensor* SafetensorsSource::find(const WeightSpec& spec) const {
  const auto it = tensors_.find(spec.name);
  if (it != tensors_.end()) return &it->second;
  const auto v = views_.find(spec.name);
  return v == views_.end() ? nullptr : &v->second;
}

std::size_t SafetensorsSource::count_unused(const std::vector<WeightSpec>& specs) const {
  std::set<std::string> wanted = fused_;
  for (const auto& sp : specs) wanted.insert(sp.name);
  std::size_t unused = 0;
  for (const auto& entry : tensors_) unused += wanted.count(entry.first) == 0 ? 1 : 0;
  return unused;
}

}  // namespace detinfer::model
