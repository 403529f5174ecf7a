// Constants of detinfer's own exp and log (numerics spec v1). Shared by the scalar
// reference and the SIMD variants so that every implementation uses the same bits.
#pragma once

#include <cstdint>

namespace detinfer::kernels::explog {

// exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k*ln2_hi - k*ln2_lo (Cody-Waite).
inline constexpr float kExpHi = 89.0f;                // x > kExpHi -> +inf (exp overflows before)
inline constexpr float kExpLo = -104.0f;              // x < kExpLo -> +0 (below 2^-150)
inline constexpr float kLog2e = 0x1.715476p+0f;       // 1.44269502
inline constexpr float kRoundMagic = 0x1.8p23f;       // 12582912: t + M - M rounds t to int
inline constexpr float kExpLn2Hi = 0x1.63p-1f;        // 0.693359375 (11 bits: k*hi exact)
inline constexpr float kExpLn2Lo = -0x1.bd0106p-13f;  // -2.12194440e-4 = ln 2 - hi
// exp(r) ~ 1 + r + r^2 * P(r) on |r| <= ln2/2 (Cephes expf coefficients, P0 highest).
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

// log(x) = k*ln2 + log(1+f), 1+f in [sqrt(2)/2, sqrt(2)); fdlibm/FreeBSD logf kernel:
// s = f/(2+f), z = s^2, R = z*(Lg1 + z*(Lg2 + z*(Lg3 + z*Lg4))).
inline constexpr float kLogLn2Hi = 0x1.62e4p-1f;            // 0.693145751953125 (15 bits)
inline constexpr float kLogLn2Lo = 0x1.7f7d1cp-20f;         // 1.42860677e-6 = ln 2 - hi
inline constexpr float kLg1 = 0xaaaaaa.0p-24f;              // 0.66666662693
inline constexpr float kLg2 = 0xccce13.0p-25f;              // 0.40000972152
inline constexpr float kLg3 = 0x91e9ee.0p-25f;              // 0.28498786688
inline constexpr float kLg4 = 0xf89e26.0p-26f;              // 0.24279078841
inline constexpr float kTwo25 = 0x1p25f;                    // scales subnormal inputs to normal
inline constexpr std::uint32_t kSqrtHalfBits = 0x3f3504f3;  // sqrt(2)/2

}  // namespace detinfer::kernels::explog
