// What the scalar reference and the CUDA kernels share, compiled for host and device: the
// DETINFER_HD qualifier and binary32 primitives whose every operation rounds to nearest
// explicitly (__fmaf_rn etc. on the device, std::fma etc. on the host), so the result does
// not depend on nvcc's contraction or precision flags. kernels/reference/exp_log_hd.h and
// half_round.h build on it; kernels/cuda/device_math.h re-exports it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DETINFER_HD __host__ __device__ __forceinline__
#else
#define DETINFER_HD inline
#endif

namespace detinfer::kernels::hd {

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

}  // namespace detinfer::kernels::hd
