// binary32 <-> bf16 / f16 on the bit patterns (numerics spec, "KV storage"): rounding to
// nearest even and the exact widening, one definition used by the CPU kernels
// (kernels::f32_to_bf16_rne, f32_to_f16_rne, bf16_to_f32, f16_to_f32) and by the CUDA
// kernels (kernels/cuda/device_math.h), so both round and widen the same way bit for bit.
#pragma once

#include <cstdint>

#include "kernels/reference/host_device.h"

namespace detinfer::kernels::half_round {

// u: the bits of a binary32. NaN stays a quiet NaN (the top of its payload kept).
DETINFER_HD std::uint16_t bf16_from_bits(std::uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// u: the bits of a binary32. Overflow (|x| >= 65520) gives inf; results below 2^-14 are
// exact multiples of 2^-24 (subnormals) or zero; NaN stays a quiet NaN.
DETINFER_HD std::uint16_t f16_from_bits(std::uint32_t u) {
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  std::uint32_t q, rem, half;
  if (a < 0x38800000u) {               // below 2^-14: a multiple of 2^-24 (subnormal) or zero
    if (a < 0x33000000u) return sign;  // below 2^-25
    const std::uint32_t shift = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;
    q = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
  } else {
    const std::uint32_t r = a - 0x38000000u;  // exponent rebiased from 127 to 15
    q = r >> 13;
    rem = r & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

// The binary32 bits of bf16 h (exact: bf16 is the top half of a binary32).
DETINFER_HD std::uint32_t bf16_widen_bits(std::uint16_t h) {
  return static_cast<std::uint32_t>(h) << 16;
}

// The binary32 bits of f16 h, exactly (subnormals normalized in integer arithmetic; NaNs
// come out quiet with their payload, as F16C's vcvtph2ps makes them).
DETINFER_HD std::uint32_t f16_widen_bits(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return sign | 0x7f800000u | (man << 13) | (man != 0 ? 0x00400000u : 0u);
  if (exp == 0) {
    if (man == 0) return sign;
    exp = 113;  // 127 - 15 + 1, lowered once per normalizing shift
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    return sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  return sign | ((exp + 112) << 23) | (man << 13);
}

}  // namespace detinfer::kernels::half_round
