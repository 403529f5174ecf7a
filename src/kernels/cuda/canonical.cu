// Canonical CUDA kernels: numerics spec v1 exactly, so each output is bitwise equal to
// kernels::ref. Parallelism is over outputs and over independent chunk partials; every
// fold of chunk partials runs in index order in one thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/canonical_kernels.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemma_kernels.cuh"

namespace detinfer::kernels::cuda {

namespace {

constexpr int kThreads = 256;

unsigned elementwise_blocks(std::int64_t n) {
  return static_cast<unsigned>(dmin((n + kThreads - 1) / kThreads, 65535));
}

std::int64_t draw_padded(std::int64_t n) {
  std::int64_t padded = 1;
  while (padded < n) padded <<= 1;
  return padded;
}

// Calls f(std::integral_constant<DType, dtype>{}) so launchers instantiate one kernel per
// storage type.
template <typename F>
void with_dtype(core::DType dtype, const char* op, F f) {
  switch (dtype) {
    case core::DType::kF32:
      return f(std::integral_constant<core::DType, core::DType::kF32>{});
    case core::DType::kBF16:
      return f(std::integral_constant<core::DType, core::DType::kBF16>{});
    case core::DType::kF16:
      return f(std::integral_constant<core::DType, core::DType::kF16>{});
  }
  fail(ErrorCode::kInvalidArgument, "cuda::", op, ": unknown dtype ", static_cast<int>(dtype));
}

// Shared memory for one float partial per spec chunk of a row.
std::size_t chunk_partial_bytes(std::int64_t n, const char* op) {
  if (n > kMaxRowLength)
    fail(ErrorCode::kUnsupported, "cuda::", op, ": row length ", n, " exceeds ", kMaxRowLength);
  return static_cast<std::size_t>((n + kChunk - 1) / kChunk) * sizeof(float);
}

// Checks the pointers (none may be null; argument 0 is the first) and launches an elementwise
// grid-stride kernel kernel(ptrs..., n); n <= 0 is a no-op.
template <typename Kernel, typename... Ptrs>
void launch_elementwise(const char* op, Kernel kernel, std::int64_t n, Stream stream,
                        Ptrs... ptrs) {
  if (n <= 0) return;
  int i = 0;
  for (const void* p : {static_cast<const void*>(ptrs)...}) {
    if (p == nullptr)
      fail(ErrorCode::kInvalidArgument, "cuda::", op, ": pointer argument ", i, " is null");
    ++i;
  }
  kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(ptrs..., n);
  DETINFER_CUDA_CHECK_LAUNCH(op);
}

}  // namespace

void exp_f32(const float* x, float* y, std::int64_t n, Stream stream) {
  launch_elementwise("exp_f32", exp_kernel, n, stream, x, y);
}

void log_f32(const float* x, float* y, std::int64_t n, Stream stream) {
  launch_elementwise("log_f32", log_kernel, n, stream, x, y);
}

void silu_mul(const float* g, const float* u, float* out, std::int64_t n, Stream stream) {
  launch_elementwise("silu_mul", silu_mul_kernel, n, stream, g, u, out);
}

void add(const float* a, const float* b, float* out, std::int64_t n, Stream stream) {
  launch_elementwise("add", add_kernel, n, stream, a, b, out);
}

void gelu_tanh_mul(const float* g, const float* u, float* out, std::int64_t n, Stream stream) {
  launch_elementwise("gelu_tanh_mul", gelu_tanh_mul_kernel, n, stream, g, u, out);
}

void scale(float* x, float s, std::int64_t n, Stream stream) {
  if (n <= 0) return;
  require_ptr(x, "scale", "x");
  scale_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(x, s, n);
  DETINFER_CUDA_CHECK_LAUNCH("scale");
}

void softcap(float* x, float cap, std::int64_t n, Stream stream) {
  if (n <= 0) return;
  require_ptr(x, "softcap", "x");
  require(cap > 0.0f, "softcap", "cap must be > 0");
  softcap_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(x, cap, n);
  DETINFER_CUDA_CHECK_LAUNCH("softcap");
}

void kv_write(const float* k, const float* v, std::int64_t ld, std::int64_t rows,
              std::int64_t start_pos, const std::int32_t* block_table, std::int64_t block_size,
              std::int64_t kv_stride, void* k_pool, void* v_pool, core::DType kv_dtype,
              Stream stream) {
  const char* op = "kv_write";
  require_ptrs(
      op,
      {{"k", k}, {"v", v}, {"block_table", block_table}, {"k_pool", k_pool}, {"v_pool", v_pool}});
  require_positive(rows, op, "rows");
  require_positive(block_size, op, "block_size");
  require_positive(kv_stride, op, "kv_stride");
  require(start_pos >= 0, op, "start_pos must be >= 0");
  require(ld >= kv_stride, op, "ld must be >= kv_stride");
  kv_write_kernel<<<grid_x(rows, op), kThreads, 0, stream>>>(
      k, v, ld, start_pos, block_table, block_size, kv_stride, k_pool, v_pool, kv_dtype);
  DETINFER_CUDA_CHECK_LAUNCH("kv_write_kernel");
}

void linear(const float* x, std::int64_t ldx, std::int64_t m, const void* w, core::DType dtype,
            std::int64_t n, std::int64_t k, const float* bias, float* y, std::int64_t ldy,
            Stream stream) {
  check_linear_args("linear", x, ldx, m, w, n, k, y, ldy);
  const unsigned blocks = grid_x((n + kLinWarps - 1) / kLinWarps, "linear");
  with_dtype(dtype, "linear", [&](auto d) {
    constexpr core::DType kD = decltype(d)::value;
    const bool vec = k % kVecElems<kD> == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
    linear_kernel<kD><<<blocks, kLinWarps * 32, 0, stream>>>(x, ldx, m, w, n, k, bias, y, ldy, vec);
  });
  DETINFER_CUDA_CHECK_LAUNCH("linear_kernel");
}

void rms_norm(const float* x, std::int64_t ldx, const float* w, float eps, float* y,
              std::int64_t ldy, std::int64_t rows, std::int64_t n, Stream stream) {
  check_row_args("rms_norm", x, ldx, y, ldy, rows, n);
  require_ptr(w, "rms_norm", "w");
  const std::size_t shared = chunk_partial_bytes(n, "rms_norm");
  rms_norm_kernel<<<grid_x(rows, "rms_norm"), kThreads, shared, stream>>>(x, ldx, w, eps, y, ldy,
                                                                          n);
  DETINFER_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows,
             std::int64_t n, Stream stream) {
  check_row_args("softmax", x, ldx, y, ldy, rows, n);
  const std::size_t shared = chunk_partial_bytes(n, "softmax");
  softmax_kernel<false><<<grid_x(rows, "softmax"), kThreads, shared, stream>>>(x, ldx, y, ldy, n);
  DETINFER_CUDA_CHECK_LAUNCH("softmax_kernel");
}

void log_softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows,
                 std::int64_t n, Stream stream) {
  check_row_args("log_softmax", x, ldx, y, ldy, rows, n);
  const std::size_t shared = chunk_partial_bytes(n, "log_softmax");
  softmax_kernel<true>
      <<<grid_x(rows, "log_softmax"), kThreads, shared, stream>>>(x, ldx, y, ldy, n);
  DETINFER_CUDA_CHECK_LAUNCH("log_softmax_kernel");
}

void argmax(const float* x, std::int64_t ldx, std::int64_t rows, std::int64_t n, std::int64_t* out,
            Stream stream) {
  require_ptrs("argmax", {{"x", x}, {"out", out}});
  require_positive(rows, "argmax", "rows");
  require_positive(n, "argmax", "n");
  require(ldx >= n, "argmax", "ldx must be >= n");
  argmax_kernel<<<grid_x(rows, "argmax"), kThreads, 0, stream>>>(x, ldx, n, out);
  DETINFER_CUDA_CHECK_LAUNCH("argmax_kernel");
}

void argmax_to_host(const std::int64_t* out, std::int64_t rows, std::int64_t* host, Stream stream) {
  require_ptrs("argmax_to_host", {{"out", out}, {"host", host}});
  require_positive(rows, "argmax_to_host", "rows");
  DETINFER_CUDA_CHECK(cudaMemcpyAsync(host, out, static_cast<std::size_t>(rows) * sizeof *host,
                                      cudaMemcpyDeviceToHost, stream));
  synchronize(stream);
  for (std::int64_t r = 0; r < rows; ++r)
    if (host[r] < 0) fail(ErrorCode::kInvalidArgument, "cuda::argmax: NaN in row ", r);
}

void rope(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads, std::int64_t ldh,
          std::int64_t d, const float* cos, const float* sin, std::int64_t ld_table,
          const std::int32_t* positions, Stream stream) {
  require_ptrs("rope", {{"x", x}, {"cos", cos}, {"sin", sin}, {"positions", positions}});
  require_positive(rows, "rope", "rows");
  require_positive(heads, "rope", "heads");
  require_positive(d, "rope", "d");
  require(d % 2 == 0, "rope", "head dim d must be even");
  require(ldh >= d && ldx >= (heads - 1) * ldh + d, "rope", "strides too small for heads x d");
  require(ld_table >= d / 2, "rope", "ld_table must be >= d/2");
  rope_kernel<<<grid_x(rows, "rope"), kThreads, 0, stream>>>(x, ldx, heads, ldh, d, cos, sin,
                                                             ld_table, positions);
  DETINFER_CUDA_CHECK_LAUNCH("rope_kernel");
}

void embedding(const std::int32_t* ids, std::int64_t rows, const void* table, core::DType dtype,
               std::int64_t vocab, std::int64_t dim, float* out, std::int64_t ldo,
               std::int32_t* error_flag, Stream stream) {
  require_ptrs("embedding", {{"ids", ids}, {"table", table}, {"out", out}});
  require_positive(rows, "embedding", "rows");
  require_positive(vocab, "embedding", "vocab");
  require_positive(dim, "embedding", "dim");
  require(ldo >= dim, "embedding", "ldo must be >= dim");
  const unsigned blocks = grid_x(rows, "embedding");
  with_dtype(dtype, "embedding", [&](auto d) {
    embedding_kernel<decltype(d)::value>
        <<<blocks, kThreads, 0, stream>>>(ids, table, vocab, dim, out, ldo, error_flag);
  });
  DETINFER_CUDA_CHECK_LAUNCH("embedding_kernel");
}

void philox_fill(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_step,
                 std::uint32_t lane, std::uint32_t* out, std::int64_t n, Stream stream) {
  if (lane > 3)
    fail(ErrorCode::kInvalidArgument, "cuda::philox_fill: lane must be 0..3, got ", lane);
  if (n <= 0) return;
  require_ptr(out, "philox_fill", "out");
  philox_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(seed, stream_id, first_step, lane,
                                                                out, n);
  DETINFER_CUDA_CHECK_LAUNCH("philox_kernel");
}

std::size_t sample_draw_workspace_bytes(std::int64_t n) {
  require_positive(n, "sample_draw_workspace_bytes", "n");
  return static_cast<std::size_t>(draw_padded(n)) * (sizeof(std::uint64_t) + sizeof(std::int32_t));
}

void sample_draw(const float* p, const std::int32_t* ids, std::int64_t n, std::uint64_t seed,
                 std::uint64_t stream_id, std::uint64_t step, std::int64_t* out, void* workspace,
                 std::size_t workspace_bytes, Stream stream) {
  const char* op = "sample_draw";
  require_ptrs(op, {{"p", p}, {"ids", ids}, {"out", out}, {"workspace", workspace}});
  require_positive(n, op, "n");
  require(n <= 0x7fffffff, op, "n must fit in int32");
  require(workspace_bytes >= sample_draw_workspace_bytes(n), op,
          "workspace smaller than sample_draw_workspace_bytes()");
  const std::int64_t padded = draw_padded(n);
  auto* keys = static_cast<std::uint64_t*>(workspace);
  auto* pos = reinterpret_cast<std::int32_t*>(keys + padded);
  const unsigned blocks = elementwise_blocks(padded);
  draw_keys_kernel<<<blocks, kThreads, 0, stream>>>(p, ids, n, padded, keys, pos);
  DETINFER_CUDA_CHECK_LAUNCH("draw_keys_kernel");
  for (std::int64_t k = 2; k <= padded; k <<= 1) {
    for (std::int64_t j = k >> 1; j > 0; j >>= 1) {
      bitonic_step_kernel<<<blocks, kThreads, 0, stream>>>(keys, pos, padded, j, k);
      DETINFER_CUDA_CHECK_LAUNCH("bitonic_step_kernel");
    }
  }
  draw_pick_kernel<<<1, 1, 0, stream>>>(p, pos, n, seed, stream_id, step, out);
  DETINFER_CUDA_CHECK_LAUNCH("draw_pick_kernel");
}

}  // namespace detinfer::kernels::cuda
