// The tensors of a Hugging Face model folder: one model.safetensors or the shards named
// by model.safetensors.index.json, memory-mapped and validated (safetensors_header.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/mapped_file.h"
#include "model/safetensors_header.h"
#include "model/tensor_source.h"

namespace detinfer::model {

struct TensorRef {
  const TensorInfo* info = nullptr;
  const MappedFile* file = nullptr;
  std::uint64_t file_offset = 0;  // where the tensor's bytes start in file
  const std::uint8_t* data() const { return file->data() + file_offset; }
};

class TensorStore {
 public:
  // Opens `dir`: the index (model.safetensors.index.json) when present, else
  // model.safetensors. Every shard the index names must exist and hold the tensors the
  // index maps to it. Throws Error naming the file and tensor.
  static TensorStore open(const std::string& dir);
  // A single safetensors file.
  static TensorStore open_file(const std::string& path);

  // nullptr when absent.
  const TensorRef* find(const std::string& name) const;
  // Throws Error(kNotFound) naming the tensor and where it was looked for.
  const TensorRef& get(const std::string& name) const;
  // All tensors, sorted by name.
  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
  // Describes where tensors come from, for messages ("<dir>/model.safetensors").
  const std::string& source() const { return source_; }

 private:
  void add_file(const std::string& path, const std::vector<std::string>* only);

  std::string source_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<SafetensorsHeader>> headers_;
  std::map<std::string, TensorRef> tensors_;
};

// The stored tensor `name` as a SourceTensor (the whole of it, in its own dtype).
SourceTensor as_source_tensor(const std::string& name, const TensorRef& ref);

struct ModelConfig;

// A TensorStore as a TensorSource: each tensor under its own (Hugging Face) name; the
// experts of a mixture-of-experts layer stored fused into 3-D tensors (transformers v5)
// as views of them under their per-expert names (fused_experts.h, checked here: Error
// naming the tensor).
class SafetensorsSource : public TensorSource {
 public:
  SafetensorsSource(const TensorStore& store, const ModelConfig& config);
  const SourceTensor* find(const WeightSpec& spec) const override;
  std::size_t count_unused(const std::vector<WeightSpec>& specs) const override;
  const std::string& source() const override { return store_.source(); }

 private:
  const TensorStore& store_;
  std::map<std::string, SourceTensor> tensors_;
  std::map<std::string, SourceTensor> views_;  // fused experts, by per-expert name
  std::set<std::string> fused_;                // the stored tensors views_ read
};

}  // namespace detinfer::model
