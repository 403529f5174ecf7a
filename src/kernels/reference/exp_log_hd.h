// detinfer's own binary32 exp and log (numerics spec v1), the one definition: the scalar
// reference (ref::exp_f32 / ref::log_f32, exp_log.cpp) and the CUDA kernels
// (kernels/cuda/device_math.h) both call these, so host and device agree bit for bit.
// Never libm: libm results differ between libc versions, and the SIMD kernels must
// reproduce these bits too.
#pragma once

#include <cstdint>

#include "kernels/reference/exp_log_constants.h"
#include "kernels/reference/host_device.h"

namespace detinfer::kernels::explog {

DETINFER_HD float exp_f32(float x) {
  using hd::fma_rn;
  if (x != x) return x + x;  // NaN (quietened)
  if (x > kExpHi) return hd::infinity();
  if (x < kExpLo) return 0.0f;
  const float t = x * kLog2e;
  const float kf = (t + kRoundMagic) - kRoundMagic;  // round(t), ties to even
  float r = fma_rn(-kf, kExpLn2Hi, x);               // exact
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
  // Scale by 2^k in two exact steps (k in [-150, 128]) so only the last one rounds
  // (subnormal results) or overflows.
  const auto k = static_cast<std::int32_t>(kf);
  const std::int32_t k1 = k >> 1;
  const std::int32_t k2 = k - k1;
  y = y * hd::pow2i(k1);
  y = y * hd::pow2i(k2);
  return y;
}

DETINFER_HD float log_f32(float x) {
  if (x != x) return x + x;
  if (x < 0.0f) return hd::quiet_nan();
  if (x == 0.0f) return -hd::infinity();
  if (x == hd::infinity()) return x;
  std::int32_t k = 0;
  std::uint32_t ix = hd::bits_of(x);
  if (ix < 0x00800000u) {  // subnormal: scale to normal, exactly
    x = x * kTwo25;
    k = -25;
    ix = hd::bits_of(x);
  }
  // Split x = 2^k * m with m in [sqrt(2)/2, sqrt(2)).
  ix += 0x3f800000u - kSqrtHalfBits;
  k += static_cast<std::int32_t>(ix >> 23) - 0x7f;
  ix = (ix & 0x007fffffu) + kSqrtHalfBits;
  const float f = hd::from_bits(ix) - 1.0f;  // exact (Sterbenz)
  const float s = hd::div_rn(f, 2.0f + f);
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
  // dk*hi - ((hfsq - (s*(hfsq + R) + dk*lo)) - f)
  const float a = s * (hfsq + R);
  const float b = a + dk * kLogLn2Lo;
  const float c = (hfsq - b) - f;
  return dk * kLogLn2Hi - c;
}

}  // namespace detinfer::kernels::explog
