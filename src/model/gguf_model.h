// A model stored as GGUF (docs/gguf.md): one file or a split set
// (name-0000N-of-0000M.gguf), its config from the metadata and its tensors as a
// TensorSource under the Hugging Face names the rest of detinfer uses.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf.h"
#include "model/mapped_file.h"
#include "model/model_config.h"
#include "model/tensor_source.h"

namespace detinfer::model {

// The files of `path`: a .gguf file (one of a split set brings the whole set), or a
// folder holding exactly one .gguf or exactly one split set. Error(kNotFound) when there
// is none, Error(kInvalidArgument) when a folder holds several models.
std::vector<std::string> gguf_model_files(const std::string& path);
// Whether `path` names a GGUF model: a file ending in .gguf, or a folder without
// config.json that holds .gguf files (a folder with config.json is a Hugging Face folder).
bool is_gguf_model(const std::string& path);

// The mapped and parsed files of one GGUF model. Split shards: each file's split.no
// and split.count are checked, the metadata is the first shard's, the tensors are the
// union (a name in two shards is kCorrupt).
class GgufModel {
 public:
  static std::unique_ptr<GgufModel> open(const std::string& path);

  const GgufFile& metadata() const { return *parsed_.front(); }
  const std::string& where() const { return where_; }
  // The tensor `name` and the file holding it, or {nullptr, nullptr}.
  std::pair<const GgufTensor*, const MappedFile*> find(const std::string& name) const;
  std::size_t tensor_count() const { return by_name_.size(); }
  const std::map<std::string, std::pair<const GgufTensor*, std::size_t>>& tensors() const {
    return by_name_;
  }
  const MappedFile& file(std::size_t i) const { return *files_[i]; }
  const GgufFile& parsed(std::size_t i) const { return *parsed_[i]; }
  // The bytes of the tensor `name` (t->bytes of them), or nullptr when absent.
  const std::uint8_t* data(const std::string& name) const;

 private:
  std::string where_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<GgufFile>> parsed_;
  std::map<std::string, std::pair<const GgufTensor*, std::size_t>> by_name_;  // -> file index
};

// GGUF metadata -> ModelConfig for general.architecture llama (Mistral files too; Mixtral
// with llama.expert_count > 0), qwen2, qwen3, olmo2, phi3, gemma2, gemma3, qwen3moe and
// qwen2moe (docs/gguf.md). A missing required key is Error(kNotFound), a contradicting or
// malformed one kCorrupt, an architecture or feature detinfer does not implement
// kUnsupported; each names the key or tensor. The tensor directory gives the vocab size and
// tied embeddings, and phi3's longrope factors are read from the tensors
// rope_factors_long.weight / rope_factors_short.weight (GGUF stores them as F32 tensors).
ModelConfig gguf_model_config(const GgufModel& model);

// The GGUF tensor name of a Hugging Face one ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight") in a model of architecture `arch` (OLMo 2's and Gemma's
// post_attention_layernorm is post_attention_norm, the others' ffn_norm; an expert's is
// its layer's stacked tensor, "blk.N.ffn_gate_exps.weight"); "" for a name GGUF models do
// not have.
std::string gguf_tensor_name(const std::string& hf_name, Architecture arch);

// The inverse of llama.cpp's converter permutation of llama Q/K rows (one head of
// head_dim rows, [first halves | second halves] in Hugging Face order, is stored with
// the halves interleaved): entry r is the stored row that holds row r in Hugging Face
// order, for `heads` heads of `head_dim` rows.
std::vector<std::int64_t> llama_qk_row_order(std::int64_t heads, std::int64_t head_dim);

// The tensors of a GGUF model for `config` (gguf_model_config of its metadata).
class GgufSource : public TensorSource {
 public:
  GgufSource(const GgufModel& model, const ModelConfig& config);
  const SourceTensor* find(const WeightSpec& spec) const override;
  // A GGUF tensor the model does not use is Error(kUnsupported) naming it (it may carry
  // something detinfer does not compute, such as rope_freqs.weight or a bias).
  std::size_t count_unused(const std::vector<WeightSpec>& specs) const override;
  const std::string& source() const override { return model_.where(); }
  std::string fingerprint_extra() const override;
  const char* config_name() const override { return "the GGUF metadata"; }
  std::string name_of(const WeightSpec& spec) const override;

 private:
  const GgufModel& model_;
  Architecture arch_;
  bool rope_factors_ = false;  // rope_factors_long/short.weight were read into the config
  std::map<std::string, SourceTensor> tensors_;  // by Hugging Face name
};

}  // namespace detinfer::model
