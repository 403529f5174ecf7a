// detinfer's own binary32 exp and log (numerics spec v1). Never libm: libm results
// differ between libc versions, and the CUDA and SIMD kernels must reproduce these bits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/reference/exp_log_constants.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::ref {

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// 2^e for e in [-126, 127].
float pow2i(std::int32_t e) { return from_bits(static_cast<std::uint32_t>(e + 127) << 23); }

}  // namespace

float exp_f32(float x) {
  using namespace explog;
  if (x != x) return x + x;  // NaN (quietened)
  if (x > kExpHi) return std::numeric_limits<float>::infinity();
  if (x < kExpLo) return 0.0f;
  const float t = x * kLog2e;
  const float kf = (t + kRoundMagic) - kRoundMagic;  // round(t), ties to even
  float r = std::fma(-kf, kExpLn2Hi, x);             // exact
  r = std::fma(-kf, kExpLn2Lo, r);
  float p = kExpP0;
  p = std::fma(p, r, kExpP1);
  p = std::fma(p, r, kExpP2);
  p = std::fma(p, r, kExpP3);
  p = std::fma(p, r, kExpP4);
  p = std::fma(p, r, kExpP5);
  const float r2 = r * r;
  float y = std::fma(p, r2, r);
  y = y + 1.0f;
  // Scale by 2^k in two exact steps (k in [-150, 128]) so only the last one rounds
  // (subnormal results) or overflows.
  const auto k = static_cast<std::int32_t>(kf);
  const std::int32_t k1 = k >> 1;
  const std::int32_t k2 = k - k1;
  y = y * pow2i(k1);
  y = y * pow2i(k2);
  return y;
}

float log_f32(float x) {
  using namespace explog;
  if (x != x) return x + x;
  if (x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  std::int32_t k = 0;
  std::uint32_t ix = bits_of(x);
  if (ix < 0x00800000u) {  // subnormal: scale to normal, exactly
    x = x * kTwo25;
    k = -25;
    ix = bits_of(x);
  }
  // Split x = 2^k * m with m in [sqrt(2)/2, sqrt(2)).
  ix += 0x3f800000u - kSqrtHalfBits;
  k += static_cast<std::int32_t>(ix >> 23) - 0x7f;
  ix = (ix & 0x007fffffu) + kSqrtHalfBits;
  const float f = from_bits(ix) - 1.0f;  // exact (Sterbenz)
  const float s = f / (2.0f + f);
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

}  // namespace detinfer::kernels::ref
