// detinfer's canonical kernels (numerics spec v1, docs/numerics.md): the dispatching
// API used by the model, the PyTorch operators and the benchmarks.
//
// Every function here is a pure function of its inputs: the result does not depend on
// the ISA chosen, the thread count, the batch size M or how callers split work. The
// scalar reference (kernels/reference/reference.h) defines the exact binary32
// operation order; optimized variants are tested to equal it bit for bit.
//
// Kernels take raw pointers, shapes and strides (row strides in elements) and know
// nothing about models or libtorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "kernels/quant.h"

namespace detinfer::core {
class ThreadPool;
}

namespace detinfer::kernels {

// Exact widening conversions.
float bf16_to_f32(std::uint16_t bits);
float f16_to_f32(std::uint16_t bits);

// Narrowing to nearest, ties to even, as bits: overflow gives +-inf, a NaN stays a
// (quiet) NaN, f16 subnormals are exact.
std::uint16_t f32_to_bf16_rne(float x);
std::uint16_t f32_to_f16_rne(float x);
// y[i] = x[i] rounded to `dtype` (as above) and widened back exactly; kF32: a copy.
// x and y may alias.
void round_to_dtype(const float* x, float* y, std::int64_t n, core::DType dtype);
// y (n elements of `dtype`, dtype_size(dtype) bytes each) = x rounded to `dtype` as above:
// f32 a copy, bf16/f16 the bit patterns. Widening y exactly gives round_to_dtype(x).
void store_as_dtype(const float* x, void* y, std::int64_t n, core::DType dtype);

// Instruction set of the optimized CPU kernels. Chosen once by cpuid, overridable with
// DETINFER_CPU_ISA=scalar|avx2|avx512 (a request the CPU cannot run is an error).
enum class Isa : std::uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
const char* to_string(Isa isa);
Isa active_isa();
// For tests and benchmarks: run every kernel with this ISA from now on (throws
// Error(kUnsupported) when the CPU lacks it).
void set_isa(Isa isa);
bool isa_supported(Isa isa);

// --- elementwise / row ops --------------------------------------------------------
float exp_f32(float x);  // detinfer's own exp (spec v1), never libm
float log_f32(float x);  // detinfer's own log (spec v1)

// Chunked dot product (chunks of 64, fma inside a chunk, plain adds across chunks).
float dot(const float* a, const float* b, std::int64_t k);
// Chunked plain sum (chunks of 64, adds inside a chunk, adds across chunks).
float sum(const float* x, std::int64_t n);
// y[r] = sum(x + r*ldx, n) / n for r in [0, rows) (PyTorch mean over the last dim).
void mean_rows(const float* x, std::int64_t ldx, std::int64_t rows, std::int64_t n, float* y);
// y[i] = exp_f32(x[i]) (x and y may alias); vectorized, same bits as exp_f32.
void exp_n(const float* x, float* y, std::int64_t n);

// y = x * (1 / sqrt(dot(x,x)/n + eps)) * w, over `rows` rows of length n.
void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
              std::int64_t ldy, std::int64_t rows, std::int64_t n, core::ThreadPool* pool);

// out[i] = g[i] / (1 + exp(-g[i])) * u[i]
void silu_mul(const float* g, const float* u, float* out, std::int64_t n);

// The shared first half of softmax and log_softmax over n > 0 values: max = max(x),
// e = exp_n(x - max), sum = sum(e) (the canonical order), log_sum = log_f32(sum). softmax(x)[i]
// is e[i] / sum and log_softmax(x)[i] is (x[i] - max) - log_sum, bit for bit: both (and
// log_softmax_at) are computed through it. `e` holds n floats and may alias nothing.
struct SoftmaxNorm {
  float max = 0.0f;
  float sum = 0.0f;
  float log_sum = 0.0f;
};
SoftmaxNorm softmax_norm(const float* x, float* e, std::int64_t n);
// out[i] = a[i] + b[i] on the active ISA (out may alias a or b; elementwise binary32).
void add(const float* a, const float* b, float* out, std::int64_t n);
// ref::max_value on the active ISA (n > 0), bit for bit: softmax_norm's maximum.
float max_value(const float* x, std::int64_t n);
// y[i] = exp_f32(x[i] - m) on the active ISA (x and y may alias): softmax_norm's exponentials.
void exp_sub(const float* x, float m, float* y, std::int64_t n);
void softmax(const float* x, float* y, std::int64_t n);
void log_softmax(const float* x, float* y, std::int64_t n);
// log_softmax(x)[i] alone (same operations and bits, without writing the other n - 1
// outputs): what a greedy step needs when no top logprobs are asked for.
float log_softmax_at(const float* x, std::int64_t n, std::int64_t i);

// Index of the largest value, ties to the lowest index. A NaN is an
// Error(kInvalidArgument); n must be > 0.
std::int64_t argmax(const float* x, std::int64_t n);

// RoPE (rotate_half convention) on `heads` vectors of length d stored with stride ldx,
// with cos/sin rows of length d/2 for this position.
void rope(float* x, std::int64_t heads, std::int64_t ldx, std::int64_t d, const float* cos,
          const float* sin);

// --- linear ------------------------------------------------------------------------
// Weights [N][K] row-major (PyTorch's nn.Linear layout) in f32, bf16 or f16, packed
// once at load time into panels of 64 output columns (k-major inside a panel, source
// dtype kept, one layout for every ISA, so set_isa() may change at any time). Widening
// is exact, so the result equals the reference linear over the f32-widened weights.
class QuantActs;

class PackedLinear {
 public:
  PackedLinear();
  ~PackedLinear();
  PackedLinear(PackedLinear&&) noexcept;
  PackedLinear& operator=(PackedLinear&&) noexcept;

  // `weights` points to N*K elements of `dtype`; they are copied (the source may be
  // unmapped afterwards). `bias` (N floats) is optional.
  static PackedLinear pack(const void* weights, core::DType dtype, std::int64_t n, std::int64_t k,
                           const float* bias = nullptr);

  // Quantized weights (quantized spec v1, docs/numerics.md "Quantized linear"): `blocks`
  // holds n rows of quant_row_bytes(format, k) bytes in the ggml block layout (a GGUF
  // tensor's bytes as they are); they are decoded exactly into int8 panels + scales. run()
  // and every entry point below then compute the quantized linear (activations quantized
  // per block of 32, exact integer block dot products, the spec's fold), the same bits
  // for every ISA, thread count and M; widen_row() returns the dequantized row, exactly.
  // `pool` (optional) decodes the panels on its threads: the same panels either way.
  static PackedLinear pack_quantized(const void* blocks, QuantFormat format, std::int64_t n,
                                     std::int64_t k, const float* bias = nullptr,
                                     core::ThreadPool* pool = nullptr);

  std::int64_t n() const;
  std::int64_t k() const;
  core::DType dtype() const;
  bool quantized() const;
  QuantFormat quant_format() const;  // meaningful when quantized()
  // Bytes this object keeps (packed weights + bias).
  std::size_t packed_bytes() const;
  // Row j of W (K elements) widened exactly to f32: the values run() multiplies by, read
  // back from the panels (so a tied embedding needs no second copy of the table).
  void widen_row(std::int64_t j, float* dst) const;

  // y[m][n] = dot(x[m], W[n], K) (+ bias[n]) for m in [0, M). Rows are independent.
  void run(const float* x, std::int64_t ldx, std::int64_t m, float* y, std::int64_t ldy,
           core::ThreadPool* pool) const;

  // Column panels of 64 outputs (the last may be partial), and the same product for the
  // columns of panels [p0, p1) only, on the calling thread.
  std::int64_t panels() const;
  void run_panels(const float* x, std::int64_t ldx, std::int64_t m, float* y, std::int64_t ldy,
                  std::int64_t p0, std::int64_t p1) const;
  // The same for quantized weights over rows already quantized (QuantActs, linear_impl.h:
  // several linears over one input quantize it once, not once per linear and panel task).
  void run_panels(const QuantActs& acts, float* y, std::int64_t ldy, std::int64_t p0,
                  std::int64_t p1) const;

  // Opaque state (kernels/linear_impl.h), read by the module's own files.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Several linears over the same input rows in ONE parallel region (one synchronization
// instead of one per linear): outputs[i].y = x W_i^T (+ bias_i). Threads split the
// concatenated column panels; every column is computed as PackedLinear::run computes it.
struct LinearOut {
  const PackedLinear* w = nullptr;
  float* y = nullptr;
  std::int64_t ldy = 0;
};
void run_linears(const LinearOut* outs, int count, const float* x, std::int64_t ldx, std::int64_t m,
                 core::ThreadPool* pool);

// The MLP's first half in one parallel region: g = x Wg^T, u = x Wu^T, a = silu_mul(g, u)
// (g, u and a: m rows of gate.n() floats). Each thread takes the same column panels of
// both and applies silu_mul to its columns. Same bits as two run() calls and silu_mul().
void run_gate_up_silu(const PackedLinear& gate, const PackedLinear& up, const float* x,
                      std::int64_t ldx, std::int64_t m, float* g, float* u, float* a,
                      core::ThreadPool* pool);

// --- attention over a paged KV cache --------------------------------------------------
// The K and V pools hold blocks of `block_size` tokens; token t of a sequence lives in
// block block_table[t / block_size] at slot t % block_size. Within a block, a token's
// K (and V) vector for kv head h starts at
//   pool + (block * block_size + slot) * kv_stride + h * head_dim,
// with kv_stride = num_kv_heads * head_dim (offsets in elements). The pools hold elements
// of kv_dtype: binary32, or the bits of bf16 / f16 (2 bytes each), which every reader
// widens exactly (bf16_to_f32 / f16_to_f32) before using them.
struct PagedKvView {
  const void* k_pool = nullptr;
  const void* v_pool = nullptr;
  const std::int32_t* block_table = nullptr;
  std::int64_t num_blocks = 0;  // entries in block_table
  std::int64_t block_size = 16;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  core::DType kv_dtype = core::DType::kF32;  // element type of k_pool and v_pool
};

// Causal GQA attention for `rows` query rows of one sequence. Row r sees keys
// [0, num_keys[r]) and has q at q + r*ldq (num_heads * head_dim floats), output at
// out + r*ldo. Query head h reads kv head h / (num_heads / num_kv_heads).
// The result of a row depends only on its q and keys [0, num_keys[r]) (spec v1); a row
// with num_keys 0 gets zeros. Errors (kInvalidArgument): num_heads not a multiple of
// num_kv_heads, num_keys beyond the block table, a negative block id, a kv_dtype that is
// not f32/bf16/f16.
void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo, core::ThreadPool* pool);

// --- Gemma 2 / Gemma 3 and sliding-window attention (docs/numerics.md "tanh",
// "Attention") ----------------------------------------------------------------------
float tanh_f32(float x);  // detinfer's own tanh (spec v1), never libm
// out[i] = gelu_tanh_f32(g[i]) * u[i]: the GeGLU MLP with gelu_pytorch_tanh.
void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n);
// x[i] = tanh_f32(x[i] / cap) * cap in place (final-logit soft-capping); cap > 0.
void softcap(float* x, float cap, std::int64_t n);

// What a layer's attention adds to the causal rule: a sliding window and soft-capping.
struct AttentionMask {
  // Per row (null: 0 for every row): the first key the row sees. Row r sees keys
  // [first_keys[r], num_keys[r]), folded in the spec's order from first_keys[r] on, as if
  // they were the whole sequence (0 <= first_keys[r] <= num_keys[r]).
  const std::int64_t* first_keys = nullptr;
  // > 0: every score s (dot * scale) becomes tanh_f32(s / softcap) * softcap before the
  // max and the exponentials (Gemma 2's attn_logit_softcapping); 0: none.
  float softcap = 0.0f;
};
// kernels::attention with a mask; the plain overload is this one with AttentionMask{}.
void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               const AttentionMask& mask, std::int64_t num_heads, const PagedKvView& kv,
               float scale, float* out, std::int64_t ldo, core::ThreadPool* pool);

}  // namespace detinfer::kernels
