// Scalar math shared by the CUDA kernels and, compiled as plain C++, by a CPU test that
// proves it equals the reference bit for bit: detinfer's exp/log (the op sequence of
// kernels/reference/exp_log.cpp with the constants of exp_log_constants.h), exact
// bf16/f16 widening and Philox4x32-10 (include/detinfer/philox.h).
//
// Every fma/div/sqrt is an explicit round-to-nearest operation so the result does not
// depend on nvcc's contraction or precision flags (the build still passes --fmad=false).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/reference/exp_log_constants.h"
#include "kernels/reference/half_round.h"

#if defined(__CUDACC__)
#define DETINFER_HD __host__ __device__ __forceinline__
#else
#define DETINFER_HD inline
#endif

namespace detinfer::kernels::cuda::dm {

DETINFER_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

DETINFER_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

DETINFER_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

DETINFER_HD std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

DETINFER_HD float from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

DETINFER_HD float infinity() { return from_bits(0x7f800000u); }
DETINFER_HD float quiet_nan() { return from_bits(0x7fc00000u); }

// 2^e for e in [-126, 127].
DETINFER_HD float pow2i(std::int32_t e) {
  return from_bits(static_cast<std::uint32_t>(e + 127) << 23);
}

// ref::exp_f32, op for op.
DETINFER_HD float exp_f32(float x) {
  using namespace explog;
  if (x != x) return x + x;
  if (x > kExpHi) return infinity();
  if (x < kExpLo) return 0.0f;
  const float t = x * kLog2e;
  const float kf = (t + kRoundMagic) - kRoundMagic;
  float r = fma_rn(-kf, kExpLn2Hi, x);
  r = fma_rn(-kf, kExpLn2Lo, r);
  float p = kExpP0;
  p = fma_rn(p, r, kExpP1);
  p = fma_rn(p, r, kExpP2);
  p = fma_rn(p, r, kExpP3);
  p = fma_rn(p, r, kExpP4);
  p = fma_rn(p, r, kExpP5);
  const float r2 = r * r;
  float y = fma_rn(p, r2, r);
  y = y + 1.0f;
  const auto k = static_cast<std::int32_t>(kf);
  const std::int32_t k1 = k >> 1;
  const std::int32_t k2 = k - k1;
  y = y * pow2i(k1);
  y = y * pow2i(k2);
  return y;
}

// ref::log_f32, op for op.
DETINFER_HD float log_f32(float x) {
  using namespace explog;
  if (x != x) return x + x;
  if (x < 0.0f) return quiet_nan();
  if (x == 0.0f) return -infinity();
  if (x == infinity()) return x;
  std::int32_t k = 0;
  std::uint32_t ix = bits_of(x);
  if (ix < 0x00800000u) {
    x = x * kTwo25;
    k = -25;
    ix = bits_of(x);
  }
  ix += 0x3f800000u - kSqrtHalfBits;
  k += static_cast<std::int32_t>(ix >> 23) - 0x7f;
  ix = (ix & 0x007fffffu) + kSqrtHalfBits;
  const float f = from_bits(ix) - 1.0f;
  const float s = div_rn(f, 2.0f + f);
  const float z = s * s;
  float R = z * kLg4;
  R = kLg3 + R;
  R = z * R;
  R = kLg2 + R;
  R = z * R;
  R = kLg1 + R;
  R = z * R;
  const float hfsq = (0.5f * f) * f;
  const float dk = static_cast<float>(k);
  const float a = s * (hfsq + R);
  const float b = a + dk * kLogLn2Lo;
  const float c = (hfsq - b) - f;
  return dk * kLogLn2Hi - c;
}

// Exact widening (kernels/reference/half_round.h, shared with the CPU): bf16 is the top
// half of a binary32; f16 in integer arithmetic (NaNs quiet with their payload, like F16C).
DETINFER_HD float bf16_to_f32(std::uint16_t h) { return from_bits(half_round::bf16_widen_bits(h)); }

DETINFER_HD float f16_to_f32(std::uint16_t h) { return from_bits(half_round::f16_widen_bits(h)); }

// f32 -> bf16 / f16, round to nearest even (kernels/reference/half_round.h, shared with
// the CPU).
DETINFER_HD std::uint16_t f32_to_bf16(float x) { return half_round::bf16_from_bits(bits_of(x)); }

DETINFER_HD std::uint16_t f32_to_f16(float x) { return half_round::f16_from_bits(bits_of(x)); }

// Philox4x32-10, as src/core/philox.cpp.
struct Philox4 {
  std::uint32_t v[4];
};

DETINFER_HD Philox4 philox4x32_10(Philox4 c, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c.v[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(p1);
    c = Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

// philox_block(seed, stream, step) of include/detinfer/philox.h.
DETINFER_HD Philox4 philox_block(std::uint64_t seed, std::uint64_t stream, std::uint64_t step) {
  const Philox4 ctr{{static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32),
                     static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  return philox4x32_10(ctr, static_cast<std::uint32_t>(seed),
                       static_cast<std::uint32_t>(seed >> 32));
}

// uniform01 of include/detinfer/philox.h: top 24 bits times 2^-24 (exact).
DETINFER_HD float uniform01(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-8f;
}

}  // namespace detinfer::kernels::cuda::dm
