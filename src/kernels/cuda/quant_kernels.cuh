// Canonical quantized-linear kernels (quantized spec v1, docs/numerics.md "Quantized
// linear"): see quant.cu for the launchers. Bitwise equal to kernels::ref::quant_linear.
//
// Device code only (no CUDA runtime calls), in an anonymous namespace: included by quant.cu
// and, compiled as plain C++ under DETINFER_CUDA_EMULATION, by the CPU emulation tests
// (tests/cuda/cuda_quant_emulation_test.cpp, the emulated model backend), which run these
// very kernels thread by thread on the CPU.
//
// The weights are decoded once on the host (ref::decode_block): wq [n][k] int8 and one
// ref::BlockScales per (row, 32-block). Every integer sum is exact; every float operation
// is the reference's, in the reference's order (one thread folds one output).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_math.h"
#include "kernels/reference/quant_blocks.h"

namespace detinfer::kernels::cuda {
namespace {

constexpr int kQBlock = 32;  // ref::kQuantBlock
static_assert(std::is_trivially_copyable_v<ref::BlockScales>, "uploaded as bytes");

// round-half-away-from-zero of a finite p with |p| < 2^31 (std::round's result): t =
// trunc(|p|) and |p| - t are exact (Sterbenz for |p| >= 1), so the tie test is exact.
__device__ __forceinline__ std::int32_t round_half_away(float p) {
  const float a = dm::from_bits(dm::bits_of(p) & 0x7FFFFFFFu);
  std::int32_t t = static_cast<std::int32_t>(a);
  if (a - static_cast<float>(t) >= 0.5f) ++t;
  return (dm::bits_of(p) >> 31) != 0 ? -t : t;
}

// ref::quantize_q8_block on x[0..31]: writes q[0..31], returns the binary16 bits of d.
__device__ __forceinline__ std::uint16_t quantize_q8_block_dev(const float* x, std::int8_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < kQBlock; ++i) {
    const std::uint32_t bits = dm::bits_of(x[i]) & 0x7FFFFFFFu;
    finite = finite && bits < 0x7F800000u;
    const float a = dm::from_bits(bits);
    amax = a > amax ? a : amax;
  }
  for (int i = 0; i < kQBlock; ++i) q[i] = 0;
  if (!finite) return 0x7E00;
  const float d = dm::div_rn(amax, 127.0f);
  const std::uint16_t dh = dm::f32_to_f16(d);
  if ((dh & 0x7FFFu) == 0) return dh;  // a zero scale: q stays 0, 1 / d is never formed
  const float id = dm::div_rn(1.0f, d);
  for (int i = 0; i < kQBlock; ++i) q[i] = static_cast<std::int8_t>(round_half_away(x[i] * id));
  return dh;
}

// One thread per (row, 32-block) of x [m][k] (ldx): xq [m][k] (ref::quantize_act_row),
// xd [m][k/32] = f16_to_f32(dh), xs [m][k/16] the half sums (ref::act_half_sums).
__global__ void quantize_acts_kernel(const float* __restrict__ x, std::int64_t ldx, std::int64_t m,
                                     std::int64_t k, std::int8_t* __restrict__ xq,
                                     float* __restrict__ xd, std::int32_t* __restrict__ xs) {
  const std::int64_t nb = k / kQBlock;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < m * nb;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i / nb, b = i % nb;
    std::int8_t* q = xq + r * k + b * kQBlock;
    xd[i] = dm::f16_to_f32(quantize_q8_block_dev(x + r * ldx + b * kQBlock, q));
    for (int h = 0; h < 2; ++h) {
      std::int32_t s = 0;
      for (int j = 0; j < 16; ++j) s += q[h * 16 + j];
      xs[2 * i + h] = s;
    }
  }
}

// ref::block_value_scaled: exact integer half dot products, then the reference's floats.
__device__ __forceinline__ float quant_block_value(const ref::BlockScales& w, bool has_min,
                                                   float dx, const std::int8_t* wq,
                                                   const std::int8_t* xq, const std::int32_t* xs) {
  std::int32_t half[2] = {0, 0};
  for (int h = 0; h < 2; ++h) {
    std::int32_t s = 0;
    for (int i = 16 * h; i < 16 * h + 16; ++i) {
      s += static_cast<std::int32_t>(wq[i]) * static_cast<std::int32_t>(xq[i]);
    }
    half[h] = s;
  }
  const std::int32_t isum = w.s[0] * half[0] + w.s[1] * half[1];
  const float v = (w.d * dx) * static_cast<float>(isum);
  if (!has_min) return v;
  const std::int32_t msum = w.m[0] * xs[0] + w.m[1] * xs[1];
  return v - (w.dm * dx) * static_cast<float>(msum);
}

// y[r][j] (ldy) for every (r, j) of [m][n], one thread per output: s = +0, s = s + v over
// the blocks in order (ref::quant_linear), then s + bias[j]. Never a split of the fold.
__global__ void quant_linear_kernel(const std::int8_t* __restrict__ xq,
                                    const float* __restrict__ xd,
                                    const std::int32_t* __restrict__ xs, std::int64_t m,
                                    const std::int8_t* __restrict__ wq,
                                    const ref::BlockScales* __restrict__ ws, bool has_min,
                                    std::int64_t n, std::int64_t k, const float* __restrict__ bias,
                                    float* __restrict__ y, std::int64_t ldy) {
  const std::int64_t nb = k / kQBlock;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < m * n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i / n, j = i % n;
    float s = 0.0f;
    for (std::int64_t b = 0; b < nb; ++b) {
      s = s + quant_block_value(ws[j * nb + b], has_min, xd[r * nb + b], wq + j * k + b * kQBlock,
                                xq + r * k + b * kQBlock, xs + r * 2 * nb + 2 * b);
    }
    y[r * ldy + j] = bias != nullptr ? s + bias[j] : s;
  }
}

// out[r][i] (ldo) = weight i of row ids[r] dequantized (ref::dequantize_block: exact
// d * (s * q), minus dm * m with a min term); an id outside [0, vocab) gives NaN.
__global__ void quant_embedding_kernel(const std::int32_t* __restrict__ ids, std::int64_t rows,
                                       const std::int8_t* __restrict__ wq,
                                       const ref::BlockScales* __restrict__ ws, bool has_min,
                                       std::int64_t vocab, std::int64_t dim,
                                       float* __restrict__ out, std::int64_t ldo) {
  const std::int64_t nb = dim / kQBlock;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < rows * dim;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i / dim, c = i % dim;
    const std::int64_t t = ids[r];
    if (t < 0 || t >= vocab) {
      out[r * ldo + c] = dm::quiet_nan();
      continue;
    }
    const ref::BlockScales& s = ws[t * nb + c / kQBlock];
    const int h = static_cast<int>(c % kQBlock) / 16;
    const float w = s.d * static_cast<float>(s.s[h] * wq[t * dim + c]);
    out[r * ldo + c] = has_min ? w - s.dm * static_cast<float>(s.m[h]) : w;
  }
}

}  // namespace
}  // namespace detinfer::kernels::cuda
