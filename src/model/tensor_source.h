// Where a model's tensors come from: a safetensors folder (TensorStore) or GGUF files
// (gguf_source.h). stream_weights (weight_loader.h) asks a TensorSource for each tensor
// the config needs, by its Hugging Face name, and copies it into a WeightSink.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/mapped_file.h"

namespace detinfer::model {

struct WeightSpec;

// How a source stores one tensor's elements.
struct TensorFormat {
  // The float element types, in which stream_weights passes tensors to WeightSink::take.
  bool is_float = true;
  core::DType dtype = core::DType::kF32;  // when is_float
  // GGUF only: the ggml type number (model/gguf.h GgmlType); -1 for safetensors. Kept for
  // every GGUF tensor, float or not, so that a quantized type can be routed at the sink.
  std::int64_t ggml_type = -1;
  std::string name;  // "F32", "BF16", "Q8_0", ... (messages and the fingerprint)
};

// One tensor as a source stores it.
struct SourceTensor {
  std::string name;  // the name in the file (GGUF: "blk.0.attn_q.weight")
  const MappedFile* file = nullptr;
  std::uint64_t file_offset = 0;  // where its bytes start in file
  std::uint64_t bytes = 0;
  std::vector<std::int64_t> shape;  // row-major, Hugging Face order (rows first)
  TensorFormat format;
  // Empty, or the rows in the order the model wants them: row r of the tensor the sink
  // gets is stored row row_order[r] (GGUF llama Q/K, whose rows converters permute).
  // Whole rows of bytes move, so this works for any element or block format.
  std::vector<std::int64_t> row_order;
  // GGUF Gemma: a norm weight llama.cpp's converter stored as 1 + w (rounded to f32 once,
  // exactly the factor a norm_plus_one model applies); the sink uses it as it is.
  bool norm_plus_one_applied = false;
  // Empty, or the name the model fingerprint commits to instead of `name`: a view of one
  // expert of a fused safetensors tensor (fused_experts.h) hashes as the per-expert tensor
  // it equals, so that the fused checkpoint has the per-expert checkpoint's fingerprint.
  std::string fingerprint_name;
  const std::uint8_t* data() const { return file->data() + file_offset; }
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // The tensor `spec` names, or nullptr when the source does not hold it.
  virtual const SourceTensor* find(const WeightSpec& spec) const = 0;
  // How many tensors the source holds that none of `specs` uses (logged, not an error).
  virtual std::size_t count_unused(const std::vector<WeightSpec>& specs) const = 0;
  // Describes where tensors come from, for messages.
  virtual const std::string& source() const = 0;
  // Source-level bytes the model fingerprint commits to besides the config text and the
  // tensors ("" for safetensors, so that their fingerprints keep their bytes).
  virtual std::string fingerprint_extra() const { return {}; }
  // The name `spec`'s tensor has in the source, for messages.
  virtual std::string name_of(const WeightSpec& spec) const;
  // Where the config came from, for shape messages ("config.json").
  virtual const char* config_name() const { return "config.json"; }
};

}  // namespace detinfer::model
