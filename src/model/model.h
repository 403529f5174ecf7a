// A loaded transformer (Llama / Mistral / Qwen2 / Qwen3 / OLMo 2 / Phi-3 family) and its
// forward pass over a paged KV cache. Composed by the engine; knows nothing of sampling or
// requests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/hash.h"
#include "detinfer/numerics.h"
#include "kernels/kernels.h"
#include "model/backend.h"
#include "model/model_config.h"
#include "model/quant_scheme.h"

namespace detinfer::core {
class ThreadPool;
}  // namespace detinfer::core

namespace detinfer::model {

class GgufModel;  // gguf_model.h

struct ModelOptions {
  NumericsMode mode = NumericsMode::kCanonical;  // kernels used by forward()
  int threads = 1;                               // CPU kernel threads (1..1024)
  DeviceSpec device;                             // where weights, KV and kernels live (cpu)
  // K/V storage in the cache: f32, or bf16/f16 rounded to nearest even on write and
  // stored in 2 bytes (canonical mode; CPU and CUDA backends).
  core::DType kv_dtype = core::DType::kF32;
  // Quantize every linear (and a tied embedding) on load with this scheme (one format, or a
  // llama.cpp-style mix: quant_scheme.h; quantized spec v1, docs/numerics.md "Quantized
  // linear"); unset: the weights as stored. Canonical mode only, on the CPU or CUDA (other
  // modes: Error(kUnsupported, "weights")).
  std::optional<QuantScheme> weights{};
};

// Fixed-size KV blocks for every layer, from a pool with a byte budget. Block ids are
// 0..capacity-1. Reference counts let the prefix cache share full blocks between
// sequences. Thread-compatible: the engine serializes access.
class KvCachePool {
 public:
  // K and V stored as `kv_dtype` (f32: 4 bytes per element; bf16/f16: the 2-byte bit
  // patterns, so the same budget holds twice the blocks), block_size tokens per block;
  // capacity = budget / block_bytes(). The pools live in `backend`'s memory (host memory
  // when null). A kv_dtype that is not f32/bf16/f16 is Error(kInvalidArgument, kv_dtype).
  KvCachePool(const ModelConfig& config, std::int64_t block_size, std::int64_t budget_bytes,
              std::shared_ptr<Backend> backend = nullptr, core::DType kv_dtype = core::DType::kF32);

  std::int64_t block_size() const { return block_size_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  // Bytes of K+V for one block across all layers (as stored: elem_bytes() per element).
  std::int64_t block_bytes() const;
  core::DType kv_dtype() const { return kv_dtype_; }
  std::int64_t elem_bytes() const { return static_cast<std::int64_t>(core::dtype_size(kv_dtype_)); }

  // Takes a free block with refcount 1; throws Error(kResourceExhausted) when none.
  std::int32_t allocate();
  void retain(std::int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void release(std::int32_t block);
  std::int32_t refcount(std::int32_t block) const;

  // Layer views for the kernels (pointers into the backend's memory; elements of
  // kv_dtype(), offsets in elements as in kernels::PagedKvView).
  void* k_pool(std::int64_t layer);
  void* v_pool(std::int64_t layer);
  const void* k_pool(std::int64_t layer) const;
  const void* v_pool(std::int64_t layer) const;
  std::int64_t kv_stride() const { return num_kv_heads_ * head_dim_; }
  std::int64_t num_layers() const { return num_layers_; }

  // Copies one block's K and V of every layer to/from a contiguous buffer of
  // block_bytes() (layer-major: K of layer 0, V of layer 0, K of layer 1, ...; the
  // elements as stored). Used by the prefix cache tiers.
  void export_block(std::int32_t block, void* dst) const;
  void import_block(std::int32_t block, const void* src);

 private:
  std::int64_t block_size_;
  std::int64_t capacity_;
  std::int64_t num_layers_;
  std::int64_t num_kv_heads_;
  std::int64_t head_dim_;
  core::DType kv_dtype_;
  std::shared_ptr<Backend> backend_;
  std::vector<BackendBuffer> k_;  // per layer: capacity * block_size * kv_stride elements
  std::vector<BackendBuffer> v_;
  std::vector<std::int32_t> refcount_;
  std::vector<std::int32_t> free_;
};

// One sequence's part of a forward step: new tokens at positions
// [start_pos, start_pos + tokens.size()), whose K/V are written into the blocks of
// block_table (which must already cover start_pos + tokens.size() tokens). Entries before
// first_live_block(model.kv_horizon(), start_pos, block_size) may be -1 (released: no row
// of the step can see their keys); every other entry is a block of the pool.
struct SequenceStep {
  std::vector<std::int32_t> tokens;
  std::int64_t start_pos = 0;
  std::vector<std::int32_t> block_table;
  // Which of the new tokens' logits to return: false = only the last one.
  bool all_logits = false;
};

// Where Model::load spent its time (benchmarks, logs).
struct ModelLoadStats {
  double load_seconds = 0;         // the whole Model::load
  double fingerprint_seconds = 0;  // of which hashing config and tensor bytes
};

class Model {
 public:
  // Loads a Hugging Face folder (config.json + model.safetensors or a sharded index), or
  // a GGUF model: a .gguf file, a split set, or a folder without config.json holding one
  // (docs/gguf.md; a folder with config.json is always read as a Hugging Face folder).
  // Validates everything; every failure is a detinfer::Error naming file and tensor.
  static std::unique_ptr<Model> load(const std::string& dir, const ModelOptions& options);
  // The same for a GGUF model the caller has already opened (its metadata read for the
  // tokenizer): the files are mapped and parsed once. `dir` is only for messages.
  static std::unique_ptr<Model> load(const std::string& dir, const ModelOptions& options,
                                     std::unique_ptr<GgufModel> opened);
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  // XXH3-128 model fingerprint (docs/fingerprint-model.md).
  virtual const Hash128& fingerprint() const = 0;
  virtual NumericsMode mode() const = 0;
  virtual int threads() const = 0;
  // Bytes of weights as stored on disk.
  virtual std::int64_t weight_bytes() const = 0;
  // Bytes the model holds in memory: its weights as prepared for the kernels (packed
  // linears, norm vectors, biases, an embedding table unless the lm_head serves its
  // rows), the RoPE table and the step buffers grown so far. Not the KV pool.
  virtual std::int64_t resident_bytes() const = 0;
  // Weight bytes one decode step reads per sequence: every linear (incl. lm_head), the
  // norms, and one embedding row (not the whole table). KV reads come on top.
  virtual std::int64_t decode_read_bytes() const { return resident_bytes(); }
  virtual ModelLoadStats load_stats() const { return {}; }
  // Where the KV pool must live for forward() (null: host memory).
  virtual std::shared_ptr<Backend> kv_backend() const { return nullptr; }
  // Runs fn over [0, n) in ranges on the model's host threads when it has them (the
  // forward pass's pool, idle between forward() calls), else as one range here. Called
  // only between forward() calls, from the thread that calls forward() (Backend).
  virtual void host_parallel_for(std::int64_t n,
                                 const std::function<void(std::int64_t, std::int64_t)>& fn) {
    if (n > 0) fn(0, n);
  }
  // The element type forward() expects of the KV pool (ModelOptions::kv_dtype).
  virtual core::DType kv_dtype() const { return core::DType::kF32; }
  // The device the forward pass runs on (recorded in run fingerprints).
  virtual DeviceInfo device_info() const { return {}; }
  // The quantized formats the model file stored its tensors in (GGUF Q8_0, ...), sorted,
  // joined by '+' ("q4_0+q8_0"); "" when none (weights quantized on load do not count).
  virtual std::string stored_quant_formats() const { return {}; }
  // > 0 when every layer attends through a sliding window of this many keys and the
  // forward pass reads only the keys a row sees (every mode and backend: the canonical
  // kernels, CUDA's split kernel, libtorch's gather): the engine then releases the blocks
  // no later row can see (model_config.h kv_horizon). 0 otherwise.
  virtual std::int64_t kv_horizon() const { return 0; }

  // Runs one batched step. Appends, per sequence in order, its requested logits rows
  // ([rows][vocab_size] floats) to `logits`. In canonical mode every row is a pure
  // function of (model, the sequence's tokens up to that position): independent of
  // the other sequences, of chunking and of the thread count.
  void forward(const std::vector<SequenceStep>& batch, KvCachePool& kv, std::vector<float>& logits);
  // The same, with the rows written where append(n) says: it returns room for n more
  // floats (contiguous with what it returned before in this call), which forward_rows
  // writes whole, so the caller need not zero them (the engine's step buffer).
  using LogitsAppend = std::function<float*(std::size_t n)>;
  virtual void forward_rows(const std::vector<SequenceStep>& batch, KvCachePool& kv,
                            const LogitsAppend& append) = 0;
};

}  // namespace detinfer::model
