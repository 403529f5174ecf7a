// CUDA error checking for the kernels_cuda module: every runtime call and every launch
// goes through these, so a CUDA failure becomes a detinfer::Error (never an abort).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

namespace detinfer::kernels::cuda {

// Throws Error naming `what`, the CUDA error and the source line when `err` is not
// cudaSuccess: cudaErrorMemoryAllocation -> kResourceExhausted, no device / driver
// problems -> kUnavailable, cudaErrorInvalidValue -> kInvalidArgument, else kInternal.
void check_cuda(cudaError_t err, const char* what, const char* file, int line);

// Validation helpers for launchers (Error(kInvalidArgument) naming the op and field).
void require(bool ok, const char* op, const char* what);
void require_positive(std::int64_t v, const char* op, const char* field);
void require_ptr(const void* p, const char* op, const char* field);
struct NamedPtr {
  const char* field;
  const void* p;
};
// require_ptr for each in order: require_ptrs(op, {{"x", x}, {"y", y}}).
void require_ptrs(const char* op, std::initializer_list<NamedPtr> ptrs);
// Pointers, sizes and strides of a linear layer y[m][n] = x[m][k] W[n][k]^T.
void check_linear_args(const char* op, const void* x, std::int64_t ldx, std::int64_t m,
                       const void* w, std::int64_t n, std::int64_t k, const void* y,
                       std::int64_t ldy);
// Pointers, sizes and strides of a row op over `rows` rows of n values.
void check_row_args(const char* op, const void* x, std::int64_t ldx, const void* y,
                    std::int64_t ldy, std::int64_t rows, std::int64_t n);
// Grid dimensions are at most 2^31-1 (x) and 65535 (y, z).
unsigned grid_x(std::int64_t v, const char* op);
unsigned grid_yz(std::int64_t v, const char* op);

}  // namespace detinfer::kernels::cuda

#define DETINFER_CUDA_CHECK(call) \
  ::detinfer::kernels::cuda::check_cuda((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: configuration errors are reported at once, execution errors
// by a later checked call on the stream.
#define DETINFER_CUDA_CHECK_LAUNCH(name) \
  ::detinfer::kernels::cuda::check_cuda(cudaGetLastError(), name, __FILE__, __LINE__)
