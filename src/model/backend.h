// The compute seam under the forward pass: the ops CanonicalModel::run is written over,
// on raw pointers into the backend's own memory (host memory for the CPU, device memory
// for CUDA), with the backend's thread pool or stream behind them. The layer loop is
// written once (canonical_model.cpp); a backend decides how each op runs:
//
// - CpuBackend (cpu_backend.cpp): kernels:: (numerics spec v1, prepacked linear).
// - CudaBackend (cuda_backend.cpp): kernels::cuda:: through a CudaOps table, canonical
//   (bitwise = CPU) or device-invariant (tensor cores); the emulation test runs the same
//   CudaBackend over the kernels' device code on the CPU.
//
// Weights are prepared once at load (make_linear: packed / uploaded / converted); a step
// starts with begin_step(), which hands the backend the step's index arrays (tokens,
// positions, KV slots, key counts, block tables) so it can stage them on its device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "detinfer/numerics.h"
#include "kernels/kernels.h"

namespace detinfer::model {

class Backend;
class RopeTable;

// A batch flattened into rows (one per new token), sequences in order.
struct BatchPlan {
  struct Seq {
    std::int64_t row_begin = 0;
    std::int64_t rows = 0;
    std::int64_t start_pos = 0;
    const std::int32_t* block_table = nullptr;  // host memory
    std::int64_t num_blocks = 0;
  };
  std::int64_t rows = 0;
  std::vector<Seq> seqs;
  std::vector<std::int32_t> tokens;      // per row
  std::vector<std::int64_t> positions;   // per row
  std::vector<std::int64_t> kv_slots;    // per row: block * block_size + slot in the pools
  std::vector<std::int64_t> num_keys;    // per row: position + 1 (causal)
  std::vector<std::int64_t> logit_rows;  // rows whose logits are returned, in output order
};

// Memory on a backend's device (move-only, freed by the backend that made it).
class BackendBuffer {
 public:
  BackendBuffer() = default;
  BackendBuffer(Backend* owner, void* ptr, std::size_t bytes)
      : owner_(owner), ptr_(ptr), bytes_(bytes) {}
  ~BackendBuffer();
  BackendBuffer(BackendBuffer&& other) noexcept;
  BackendBuffer& operator=(BackendBuffer&& other) noexcept;
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  Backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// One linear layer's weights (and bias), prepared once for the backend's linear op.
class BackendLinear {
 public:
  virtual ~BackendLinear() = default;
  virtual std::int64_t n() const = 0;     // output features
  virtual std::int64_t k() const = 0;     // input features
  virtual std::size_t bytes() const = 0;  // memory the backend keeps for it
};

// The device a backend runs on, as a run fingerprint records it.
struct DeviceInfo {
  std::string device = "cpu";      // "cpu" | "cuda"
  std::string name;                // GPU model, e.g. "NVIDIA H200" ("" for the CPU)
  std::string compute_capability;  // e.g. "9.0"
  std::string driver;              // CUDA driver version, e.g. "13.0"
};

// The KV pools of one layer and their block geometry.
struct KvLayer {
  void* k_pool = nullptr;  // elements of kv_dtype
  void* v_pool = nullptr;
  std::int64_t block_size = 16;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  // The pools' element type: kv_write rounds K and V to it (nearest-even) and stores the
  // bf16/f16 bits; attention widens them back exactly.
  core::DType kv_dtype = core::DType::kF32;
  // The layer's attention rule beyond causal (kernels::AttentionMask): > 0: a row with
  // num_keys keys sees only the last `window` of them (first key max(0, num_keys -
  // window)); softcap > 0: scores are soft-capped (Gemma 2).
  std::int64_t window = 0;
  float softcap = 0.0f;
};

// The kernels' view of one sequence's blocks (num_blocks ids at block_table) in a layer.
inline kernels::PagedKvView paged_view(const KvLayer& kv, const std::int32_t* block_table,
                                       std::int64_t num_blocks) {
  kernels::PagedKvView view;
  view.k_pool = kv.k_pool;
  view.v_pool = kv.v_pool;
  view.block_table = block_table;
  view.num_blocks = num_blocks;
  view.block_size = kv.block_size;
  view.num_kv_heads = kv.num_kv_heads;
  view.head_dim = kv.head_dim;
  view.kv_dtype = kv.kv_dtype;
  return view;
}

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda:0".
  virtual std::string name() const = 0;
  // The facts a run fingerprint records: device model, driver, compute capability.
  virtual DeviceInfo device_info() const = 0;
  virtual NumericsMode numerics() const = 0;

  // --- memory (allocations are zero-filled; copies are synchronous) ---
  // How a buffer's pages get touched: kDense (soon all of it: weights, activations,
  // logits; host memory may then be backed by huge pages, core/huge_pages.h) or kGrowing
  // (from its start as far as it is used: the KV pool's blocks, in 4 KiB pages so that a
  // short context does not hold 2 MiB per layer).
  enum class Touch { kDense, kGrowing };
  BackendBuffer alloc(std::size_t bytes, Touch touch = Touch::kDense);
  BackendBuffer upload_new(const void* host, std::size_t bytes);
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
  // Copies between two places of this backend's memory.
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;

  // --- weights, prepared once at load ---
  // W is [n][k] row-major in `dtype` (host memory, copied); bias (n floats) optional.
  virtual std::unique_ptr<BackendLinear> make_linear(const void* w, core::DType dtype,
                                                     std::int64_t n, std::int64_t k,
                                                     const float* bias) = 0;
  // Quantized W: n rows of kernels::quant_row_bytes(format, k) bytes of ggml blocks (host
  // memory, copied). Default: Error(kUnsupported, "weights") (backends without quantized
  // kernels: CUDA today).
  virtual std::unique_ptr<BackendLinear> make_quantized_linear(const void* blocks,
                                                               kernels::QuantFormat format,
                                                               std::int64_t n, std::int64_t k,
                                                               const float* bias);
  // Whether make_quantized_linear works here (false: the default that refuses).
  virtual bool has_quantized_kernels() const { return false; }

  // --- one step ---
  // Stages the step's index arrays (and the RoPE rows it needs) for the ops below.
  virtual void begin_step(const BatchPlan& plan, const RopeTable& rope) = 0;
  // x[r] = widen(table[tokens[r]]) for every row of the step; table is [vocab][dim].
  virtual void embedding(const void* table, core::DType dtype, std::int64_t vocab, std::int64_t dim,
                         float* x) = 0;
  // Whether embedding_from_linear() can read rows back from a prepared linear: then a
  // model with tied embeddings keeps one copy of the table (the lm_head) instead of two.
  virtual bool linear_serves_rows() const { return false; }
  // x[r] = row tokens[r] of w's [n][k] weights, widened exactly, for every row of the
  // step (the same values embedding() gives from the table w was made from).
  virtual void embedding_from_linear(const BackendLinear& w, float* x);
  virtual void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                        std::int64_t ldy, std::int64_t rows, std::int64_t n) = 0;
  virtual void linear(const BackendLinear& w, const float* x, std::int64_t ldx, std::int64_t m,
                      float* y, std::int64_t ldy) = 0;
  // The attention input projections (x -> q, k, v, each row-contiguous); a backend may
  // fuse them. Default: three linear() calls.
  virtual void project_qkv(const BackendLinear& wq, const BackendLinear& wk,
                           const BackendLinear& wv, const float* x, std::int64_t m, float* q,
                           float* k, float* v);
  // The MLP's first half: a = silu(x W_gate^T) * (x W_up^T); g and u are scratch of the
  // same size. A backend may fuse them. Default: two linear() calls and silu_mul().
  virtual void mlp_gate_up(const BackendLinear& wgate, const BackendLinear& wup, const float* x,
                           std::int64_t m, float* g, float* u, float* a);
  // RoPE in place on `heads` vectors of head_dim per step row (row r at x + r*ldx), at
  // the row's position: the first `rotary_dims` of each head rotate (the RoPE table's
  // 2 * half()), the rest pass through.
  virtual void rope(float* x, std::int64_t ldx, std::int64_t heads, std::int64_t head_dim,
                    std::int64_t rotary_dims) = 0;
  // Writes every step row's K and V (kv_stride floats at k + r*ld, v + r*ld) into its KV
  // slot of the layer's pools.
  virtual void kv_write(const float* k, const float* v, std::int64_t ld, const KvLayer& kv) = 0;
  // Causal paged attention for every sequence of the step (rows see keys [0, pos]).
  virtual void attention(const float* q, std::int64_t ldq, std::int64_t num_heads,
                         const KvLayer& kv, float scale, float* out, std::int64_t ldo) = 0;
  virtual void silu_mul(const float* g, const float* u, float* out, std::int64_t n) = 0;
  // out = a + b elementwise (out may alias a or b).
  virtual void add(const float* a, const float* b, float* out, std::int64_t n) = 0;
  // out[i] = x[logit_rows[i]] (rows of length n, stride ld) for the step's logit rows.
  virtual void gather_logit_rows(const float* x, std::int64_t ld, std::int64_t n, float* out) = 0;
  // Waits for the step's work and copies n floats to the host (the logits copy-out).
  virtual void copy_out(const float* src, std::int64_t n, float* host) = 0;
  // Whether the backend computes in host memory, so that an op may write straight into a
  // caller's host buffer (the logits: no copy-out).
  virtual bool computes_in_host_memory() const { return false; }
  // Runs fn over [0, n) in ranges on the backend's host threads (the CPU backend's pool,
  // idle between steps), or as one range on the calling thread (the default). Host work
  // on a step's output rows: called between steps, from the thread that runs them.
  virtual void host_parallel_for(std::int64_t n,
                                 const std::function<void(std::int64_t, std::int64_t)>& fn) {
    if (n > 0) fn(0, n);
  }

  // --- Gemma 2 / Gemma 3 (issue 29). The defaults refuse (Error kUnsupported): a backend
  // that implements them says so with has_gemma_ops(). attention() with a KvLayer window
  // or softcap is part of the same set.
  virtual bool has_gemma_ops() const { return false; }
  // x[i] = x[i] * s (the embedding scale).
  virtual void scale(float* x, float s, std::int64_t n);
  // The GeGLU MLP's first half: a = gelu_tanh(x W_gate^T) * (x W_up^T); g, u scratch.
  virtual void mlp_gate_up_gelu(const BackendLinear& wgate, const BackendLinear& wup,
                                const float* x, std::int64_t m, float* g, float* u, float* a);
  // x[i] = tanh(x[i] / cap) * cap (final-logit soft-capping).
  virtual void softcap(float* x, float cap, std::int64_t n);
  // The RoPE table rope() uses from now on (Gemma 3's local and global tables; the step's
  // table again at the next begin_step()). Covers the step's positions.
  virtual void set_rope(const RopeTable& rope);

 protected:
  friend class BackendBuffer;
  virtual void* allocate_zeroed(std::size_t bytes, Touch touch) = 0;
  virtual void free(void* ptr) noexcept = 0;
};

// The CPU backend over kernels:: with `threads` kernel threads (canonical numerics).
std::shared_ptr<Backend> make_cpu_backend(int threads);

}  // namespace detinfer::model
