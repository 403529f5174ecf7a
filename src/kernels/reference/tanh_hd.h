// detinfer's own binary32 tanh and tanh-approximate GELU (numerics spec v1, docs/numerics.md
// "tanh"), host/device like exp_log_hd.h: the scalar reference, the CPU kernels and any
// CUDA kernel call these, so every implementation gives the same bits. Never libm.
//
// Used by Gemma 2 / Gemma 3: attention-logit and final-logit soft-capping
// (tanh(x / cap) * cap) and the GeGLU MLP (gelu_pytorch_tanh).
#pragma once

#include <cstdint>

#include "kernels/reference/exp_log_hd.h"
#include "kernels/reference/host_device.h"

namespace detinfer::kernels::explog {

// |x| below this: odd Taylor polynomial of degree 17; above: (1 - e) / (1 + e), e = exp(-2|x|).
inline constexpr float kTanhSmall = 0.5f;
// Taylor coefficients of tanh (x^3 ... x^17), each rounded to binary32.
inline constexpr float kTanhC3 = -0x1.555556p-2f;    // -1/3
inline constexpr float kTanhC5 = 0x1.111112p-3f;     // 2/15
inline constexpr float kTanhC7 = -0x1.ba1ba2p-5f;    // -17/315
inline constexpr float kTanhC9 = 0x1.664f48p-6f;     // 62/2835
inline constexpr float kTanhC11 = -0x1.226e36p-7f;   // -1382/155925
inline constexpr float kTanhC13 = 0x1.d6d3d0p-9f;    // 21844/6081075
inline constexpr float kTanhC15 = -0x1.7da364p-10f;  // -929569/638512875
inline constexpr float kTanhC17 = 0x1.355824p-11f;   // 6404582/10854718875

// gelu_pytorch_tanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
inline constexpr float kGeluBeta = 0x1.988454p-1f;  // sqrt(2/pi) = 0.797884583
inline constexpr float kGeluKappa = 0.044715f;

DETINFER_HD float tanh_f32(float x) {
  if (x != x) return x + x;  // NaN (quietened)
  const std::uint32_t sign = hd::bits_of(x) & 0x80000000u;
  const float a = hd::from_bits(hd::bits_of(x) & 0x7fffffffu);  // |x|, exact
  float t;
  if (a < kTanhSmall) {
    const float z = a * a;
    float p = kTanhC17;
    p = hd::fma_rn(p, z, kTanhC15);
    p = hd::fma_rn(p, z, kTanhC13);
    p = hd::fma_rn(p, z, kTanhC11);
    p = hd::fma_rn(p, z, kTanhC9);
    p = hd::fma_rn(p, z, kTanhC7);
    p = hd::fma_rn(p, z, kTanhC5);
    p = hd::fma_rn(p, z, kTanhC3);
    t = hd::fma_rn(a * z, p, a);
  } else {
    const float e = exp_f32(-2.0f * a);  // 2|x| is exact (or +inf: e = +0)
    t = hd::div_rn(1.0f - e, 1.0f + e);
  }
  return hd::from_bits(hd::bits_of(t) | sign);
}

// (0.5 * x) * (1 + tanh_f32(beta * (x + kappa * ((x * x) * x)))).
DETINFER_HD float gelu_tanh_f32(float x) {
  const float x3 = (x * x) * x;
  const float inner = kGeluBeta * (x + kGeluKappa * x3);
  return (0.5f * x) * (1.0f + tanh_f32(inner));
}

// Soft-capping (Gemma 2): tanh_f32(x / cap) * cap.
DETINFER_HD float softcap_f32(float x, float cap) { return tanh_f32(hd::div_rn(x, cap)) * cap; }

}  // namespace detinfer::kernels::explog
