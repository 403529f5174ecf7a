// Gemma 2 / Gemma 3 elementwise kernels (issue 29): GeGLU with tanh GELU, the embedding
// scale and final-logit soft-capping, over the one host/device tanh definition
// (kernels/reference/tanh_hd.h), so each element has the CPU's bits. Device code only, in
// an anonymous namespace: included by canonical.cu and by the CPU emulation tests.
#pragma once

#include <cstdint>

#include "kernels/reference/tanh_hd.h"

namespace detinfer::kernels::cuda {
namespace {

__global__ void gelu_tanh_mul_kernel(const float* g, const float* u, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = explog::gelu_tanh_f32(g[i]) * u[i];
}

__global__ void scale_kernel(float* x, float s, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = x[i] * s;
}

__global__ void softcap_kernel(float* x, float cap, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = explog::softcap_f32(x[i], cap);
}

}  // namespace
}  // namespace detinfer::kernels::cuda
