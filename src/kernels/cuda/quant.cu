// Canonical quantized-linear launchers (quant_kernels.cuh): quantized spec v1 exactly, so
// each output is bitwise equal to kernels::ref::quant_linear. One thread per output (or
// per activation block); no fold is ever split.
#include <cuda_runtime.h>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/quant_kernels.cuh"

namespace detinfer::kernels::cuda {

namespace {

constexpr int kQuantThreads = 128;

unsigned stride_blocks(std::int64_t work) {
  const std::int64_t b = (work + kQuantThreads - 1) / kQuantThreads;
  return static_cast<unsigned>(b < 65535 ? b : 65535);
}

void require_k(std::int64_t k, const char* op) {
  require_positive(k, op, "k");
  require(k % kQBlock == 0, op, "k must be a multiple of 32");
}

}  // namespace

void quantize_acts(const float* x, std::int64_t ldx, std::int64_t m, std::int64_t k,
                   std::int8_t* xq, float* xd, std::int32_t* xs, Stream stream) {
  const char* op = "quantize_acts";
  if (m <= 0) return;
  require_k(k, op);
  require(ldx >= k, op, "ldx must be >= k");
  require_ptrs(op, {{"x", x}, {"xq", xq}, {"xd", xd}, {"xs", xs}});
  quantize_acts_kernel<<<stride_blocks(m * (k / kQBlock)), kQuantThreads, 0, stream>>>(x, ldx, m, k,
                                                                                       xq, xd, xs);
  DETINFER_CUDA_CHECK_LAUNCH("quantize_acts_kernel");
}

void quant_linear(const std::int8_t* xq, const float* xd, const std::int32_t* xs, std::int64_t m,
                  const std::int8_t* wq, const ref::BlockScales* ws, bool has_min, std::int64_t n,
                  std::int64_t k, const float* bias, float* y, std::int64_t ldy, Stream stream) {
  const char* op = "quant_linear";
  if (m <= 0) return;
  require_k(k, op);
  require_positive(n, op, "n");
  require(ldy >= n, op, "ldy must be >= n");
  require_ptrs(op, {{"xq", xq}, {"xd", xd}, {"xs", xs}, {"wq", wq}, {"ws", ws}, {"y", y}});
  quant_linear_kernel<<<stride_blocks(m * n), kQuantThreads, 0, stream>>>(
      xq, xd, xs, m, wq, ws, has_min, n, k, bias, y, ldy);
  DETINFER_CUDA_CHECK_LAUNCH("quant_linear_kernel");
}

void quant_embedding(const std::int32_t* ids, std::int64_t rows, const std::int8_t* wq,
                     const ref::BlockScales* ws, bool has_min, std::int64_t vocab, std::int64_t dim,
                     float* out, std::int64_t ldo, Stream stream) {
  const char* op = "quant_embedding";
  if (rows <= 0) return;
  require_k(dim, op);
  require_positive(vocab, op, "vocab");
  require(ldo >= dim, op, "ldo must be >= dim");
  require_ptrs(op, {{"ids", ids}, {"wq", wq}, {"ws", ws}, {"out", out}});
  quant_embedding_kernel<<<stride_blocks(rows * dim), kQuantThreads, 0, stream>>>(
      ids, rows, wq, ws, has_min, vocab, dim, out, ldo);
  DETINFER_CUDA_CHECK_LAUNCH("quant_embedding_kernel");
}

}  // namespace detinfer::kernels::cuda
