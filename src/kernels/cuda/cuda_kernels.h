// CUDA kernels (issue 11), over raw device pointers and a stream. Two families:
//
// - canonical: numerics spec v1 exactly (docs/numerics.md, kernels/reference). Every
//   result is bitwise equal to the CPU reference for the same inputs (NaN payloads
//   excepted: the GPU returns its canonical NaN). Reductions follow the spec's chunk-64
//   order; parallelism is over outputs and over independent chunk partials only.
// - device-invariant ("fast"): tensor cores and tree reductions, but one fixed reduction
//   shape for every batch size M and a fixed split SIZE over the KV cache, so results
//   are bitwise invariant to batching, chunked prefill and cache hits on one GPU model
//   (no claim across GPU models or versus the CPU).
//
// All launchers are asynchronous on `stream` and throw detinfer::Error for invalid
// arguments (checked on the host before launching) and for CUDA errors (every call and
// every launch is checked). This header includes no CUDA header so plain C++ TUs (the
// model, tests, benchmarks) can use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/kernels.h"
#include "kernels/reference/quant_blocks.h"

struct CUstream_st;

namespace detinfer::kernels::cuda {

using Stream = CUstream_st*;  // the same type as cudaStream_t; nullptr = default stream

// --- devices and memory ---------------------------------------------------------------
// Number of usable CUDA devices; 0 when there is none or no working driver. Never throws.
int device_count() noexcept;
// Why device_count() is 0, or "" when it is not ("no CUDA device", driver error text).
std::string no_device_reason();
// "NVIDIA H200 (sm_90, 132 SMs, 139 GiB), driver 13.0, runtime 13.0".
std::string device_description(int device);
struct DeviceProperties {
  std::string name;  // "NVIDIA H200"
  int major = 0;     // compute capability
  int minor = 0;
  std::string driver;   // "13.0"
  std::string runtime;  // "13.0"
};
DeviceProperties device_properties(int device);
void set_device(int device);
void synchronize(Stream stream);

// Owning device allocation (cudaMalloc/cudaFree). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  // Synchronous copies of `bytes` (≤ bytes()) from/to host memory.
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void fill_zero();

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Synchronous host-to-device copy into any device address (e.g. inside a DeviceBuffer).
void copy_from_host(void* dst, const void* src, std::size_t bytes);

// Synchronous device-to-host copy from any device address (ordered after the work queued
// on the default stream, like copy_from_host).
void copy_to_host(void* dst, const void* src, std::size_t bytes);

// Raw zero-filled device allocation for owners with their own RAII (the model's CUDA
// backend); free_device(nullptr) is a no-op and never throws.
void* malloc_device_zeroed(std::size_t bytes);
void free_device(void* p) noexcept;

// Device-to-device copy on a stream (benchmarks use it as the bandwidth baseline).
void copy_device(void* dst, const void* src, std::size_t bytes, Stream stream);

// Elapsed GPU time between two points on a stream (cudaEvent pair), for benchmarks.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(Stream stream);
  void stop(Stream stream);
  // Waits for the stop event; milliseconds between start and stop.
  float elapsed_ms();

 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

// --- canonical kernels: bitwise equal to kernels::ref -----------------------------------
// Elementwise detinfer exp/log (tests compare them to ref::exp_f32/log_f32).
void exp_f32(const float* x, float* y, std::int64_t n, Stream stream);
void log_f32(const float* x, float* y, std::int64_t n, Stream stream);

// y[m][j] = dot(x[m], W[j], k) (+ bias[j]); W is [n][k] row-major in `dtype`, widened
// exactly. One warp per output column, reading W once per 8 rows of x (16-byte vector
// loads when k is a multiple of 8 (4 for f32) and w is 16-byte aligned).
void linear(const float* x, std::int64_t ldx, std::int64_t m, const void* w, core::DType dtype,
            std::int64_t n, std::int64_t k, const float* bias, float* y, std::int64_t ldy,
            Stream stream);

// ref::rms_norm on each of `rows` rows; y may equal x.
void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
              std::int64_t ldy, std::int64_t rows, std::int64_t n, Stream stream);

void silu_mul(const float* g, const float* u, float* out, std::int64_t n, Stream stream);
// Gemma (issue 29), elementwise with the CPU's bits: out = gelu_tanh(g) * u; x = x * s;
// x = tanh(x / cap) * cap (cap > 0).
void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n, Stream stream);
void scale(float* x, float s, std::int64_t n, Stream stream);
void softcap(float* x, float cap, std::int64_t n, Stream stream);

// ref::softmax / ref::log_softmax on each row; y may equal x. Row ops keep one partial
// per spec chunk in shared memory, so n ≤ kMaxRowLength (32 KiB of partials, leaving
// room for the static shared memory under the 48 KiB launch default).
inline constexpr std::int64_t kMaxRowLength = std::int64_t{8192} * 64;
void softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows,
             std::int64_t n, Stream stream);
void log_softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows,
                 std::int64_t n, Stream stream);

// out[r] = ref::argmax(row r), or -1 when the row holds a NaN (the device cannot throw:
// argmax_to_host turns -1 into Error(kInvalidArgument) like the CPU).
void argmax(const float* x, std::int64_t ldx, std::int64_t rows, std::int64_t n, std::int64_t* out,
            Stream stream);
// Synchronizes `stream`, copies `rows` results to `host` and throws on a NaN row.
void argmax_to_host(const std::int64_t* out, std::int64_t rows, std::int64_t* host, Stream stream);

// ref::rope in place on x[r][h] = x + r*ldx + h*ldh (head_dim d, even) for r < rows,
// h < heads, with the cos/sin row of position positions[r] (device int32) at
// cos + pos*ld_table (d/2 floats each). Tables are built on the host (in double).
void rope(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads, std::int64_t ldh,
          std::int64_t d, const float* cos, const float* sin, std::int64_t ld_table,
          const std::int32_t* positions, Stream stream);

// out[r][:] = widen(table[ids[r]][:]) for a [vocab][dim] table in `dtype`. An id outside
// [0, vocab) fills its row with NaN and sets *error_flag = 1 (when error_flag is not
// null; it is never cleared here).
void embedding(const std::int32_t* ids, std::int64_t rows, const void* table, core::DType dtype,
               std::int64_t vocab, std::int64_t dim, float* out, std::int64_t ldo,
               std::int32_t* error_flag, Stream stream);

// out[i] = a[i] + b[i] (the residual connection); out may alias a or b.
void add(const float* a, const float* b, float* out, std::int64_t n, Stream stream);

// Writes the K and V rows of `rows` new tokens of one sequence (k + r*ld, v + r*ld, each
// kv_stride = num_kv_heads * head_dim floats) at positions start_pos + r into a paged pool:
// block block_table[pos / block_size] (device int32), slot pos % block_size. Exact copies
// for kv_dtype f32; bf16/f16 values are rounded to nearest even and stored as their 2-byte
// bit patterns (numerics spec, KV storage), the bits kernels::store_as_dtype gives.
void kv_write(const float* k, const float* v, std::int64_t ld, std::int64_t rows,
              std::int64_t start_pos, const std::int32_t* block_table, std::int64_t block_size,
              std::int64_t kv_stride, void* k_pool, void* v_pool, core::DType kv_dtype,
              Stream stream);

// kernels::attention with device pointers: q, out, num_keys (device int64[rows]) and
// every pointer in kv. One block per (row, head), keys in tiles of 64 = spec chunks.
// A row whose num_keys exceeds the block table's capacity gets NaN outputs.
inline constexpr std::int64_t kMaxHeadDim = 256;
void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo, Stream stream);
// The same with kernels::AttentionMask's rule (issue 29): window > 0: row r sees keys
// [max(0, num_keys[r] - window), num_keys[r]), folded from the first; softcap > 0:
// soft-capped scores. window 0 and softcap 0 is attention().
void attention_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                      const std::int64_t* num_keys, std::int64_t num_heads, const PagedKvView& kv,
                      float scale, std::int64_t window, float softcap, float* out, std::int64_t ldo,
                      Stream stream);

// --- canonical quantized linear (quantized spec v1): bitwise equal to ref::quant_linear ---
// The weights are decoded once on the host (ref::decode_block) into wq [n][k] int8 and one
// ref::BlockScales per (row, 32-block) at ws[j * (k / 32) + b]; has_min is
// quant_format_info(format).has_min. k is a multiple of 32.
//
// ref::quantize_act_row and ref::act_half_sums of each row of x [m][k] (ldx): xq [m][k],
// xd [m][k / 32] (the widened binary16 scales), xs [m][k / 16]. One thread per block.
void quantize_acts(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                   std::int8_t* xq, float* xd, std::int32_t* xs, Stream stream);
// y[r][j] (ldy) = ref::quant_linear's fold of ref::block_value_scaled over the blocks in
// order (+ bias[j]), from quantize_acts' output. One thread per output.
void quant_linear(const std::int8_t* xq, const float* xd, const std::int32_t* xs, std::int64_t m,
                  const std::int8_t* wq, const ref::BlockScales* ws, bool has_min, std::int64_t n,
                  std::int64_t k, const float* bias, float* y, std::int64_t ldy, Stream stream);
// out[r] (ldo) = row ids[r] of the decoded [vocab][dim] weights dequantized exactly
// (ref::dequantize_block's values); an id outside [0, vocab) gives a NaN row.
void quant_embedding(const std::int32_t* ids, std::int64_t rows, const std::int8_t* wq,
                     const ref::BlockScales* ws, bool has_min, std::int64_t vocab, std::int64_t dim,
                     float* out, std::int64_t ldo, Stream stream);

// --- sampling draw ----------------------------------------------------------------------
// Philox4x32-10 on the device, same mapping as include/detinfer/philox.h; out[i] =
// philox_block(seed, stream_id, first_step + i)[lane] for i < n. Tests compare it to
// the CPU generator.
void philox_fill(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_step,
                 std::uint32_t lane, std::uint32_t* out, std::int64_t n, Stream stream);

// decode::draw_index (docs/sampling.md) on the device: `p` = the candidates' canonical
// softmax (cuda::softmax gives the CPU's bits), `ids` their distinct token ids. Orders
// the candidates by p descending then id ascending (a bitonic sort of 64-bit keys, exact
// because the order is total), then one thread forms the sequential total, the target
// philox_uniform(seed, stream_id, step, 0) * total and the first running sum above it.
// Writes the chosen candidate position to *out. Requires p[i] >= 0 and ids >= 0.
std::size_t sample_draw_workspace_bytes(std::int64_t n);
void sample_draw(const float* p, const std::int32_t* ids, std::int64_t n, std::uint64_t seed,
                 std::uint64_t stream_id, std::uint64_t step, std::int64_t* out, void* workspace,
                 std::size_t workspace_bytes, Stream stream);

// --- device-invariant kernels ------------------------------------------------------------
// f32 -> bf16 (round to nearest even), elementwise.
void f32_to_bf16(const float* x, std::uint16_t* y, std::int64_t n, Stream stream);

// y[m][j] = sum_k x[m][k] * W[j][k] (+ bias[j]) with bf16 x and W, f32 accumulation on
// tensor cores (WMMA 16x16x16), one fixed 64x64x32 tile for every M and no split-K:
// row m's bits depend only on x[m], W and k. Requires k % 8 == 0, ldx % 8 == 0 and
// 16-byte aligned x and w.
inline constexpr int kGemmTileM = 64;
inline constexpr int kGemmTileN = 64;
inline constexpr int kGemmTileK = 32;
void linear_bf16_tc(const std::uint16_t* x, std::int64_t ldx, std::int64_t m,
                    const std::uint16_t* w, std::int64_t n, std::int64_t k, const float* bias,
                    float* y, std::int64_t ldy, Stream stream);

// RMSNorm, one row per block of a fixed 256 threads with a fixed tree reduction.
void rms_norm_fast(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
                   std::int64_t ldy, std::int64_t rows, std::int64_t n, Stream stream);

// Attention with the KV range of each row cut into splits of a FIXED SIZE
// (kAttentionSplitKeys keys from key 0, not a fixed number of splits), combined in split
// order: the same bits for a row whether it is computed in prefill, chunked prefill or
// decode, alone or in a batch. `max_keys` ≥ every num_keys[r] (host value, sizes the
// grid); `workspace` holds attention_split_workspace_bytes(...) bytes.
inline constexpr std::int64_t kAttentionSplitKeys = 256;
std::size_t attention_split_workspace_bytes(std::int64_t rows, std::int64_t num_heads,
                                            std::int64_t head_dim, std::int64_t max_keys);
void attention_split(const float* q, std::int64_t ldq, std::int64_t rows,
                     const std::int64_t* num_keys, std::int64_t max_keys, std::int64_t num_heads,
                     const PagedKvView& kv, float scale, float* out, std::int64_t ldo,
                     void* workspace, std::size_t workspace_bytes, Stream stream);
// The same with kernels::AttentionMask's rule: window > 0: row r sees keys
// [first, num_keys[r]) with first = max(0, num_keys[r] - window); the splits keep their
// fixed boundaries (multiples of kAttentionSplitKeys from key 0), each clipped to the
// visible keys, and splits wholly before `first` are skipped (their blocks are never
// read: released blocks may be -1 in the table). softcap > 0: every score becomes
// softcap_f32(score, softcap) before the max (the canonical kernel's rule). The split
// boundaries, and so the bits, still depend only on the row's own key count.
void attention_split_masked(const float* q, std::int64_t ldq, std::int64_t rows,
                            const std::int64_t* num_keys, std::int64_t max_keys,
                            std::int64_t num_heads, const PagedKvView& kv, float scale,
                            std::int64_t window, float softcap, float* out, std::int64_t ldo,
                            void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace detinfer::kernels::cuda
