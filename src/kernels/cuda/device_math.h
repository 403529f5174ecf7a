// Scalar math shared by the CUDA kernels and, compiled as plain C++, by a CPU test that
// proves it equals the reference bit for bit: detinfer's exp/log and the bf16/f16
// rounding (the reference's own host/device definitions, re-exported here), exact
// bf16/f16 widening and Philox4x32-10 (include/detinfer/philox.h).
//
// Every fma/div/sqrt is an explicit round-to-nearest operation so the result does not
// depend on nvcc's contraction or precision flags (the build still passes --fmad=false).
#pragma once

#include <cstdint>

#include "kernels/reference/exp_log_hd.h"
#include "kernels/reference/half_round.h"
#include "kernels/reference/host_device.h"

namespace detinfer::kernels::cuda::dm {

// The explicit-rounding primitives and exp/log are the reference's own host/device
// definitions (kernels/reference/host_device.h, exp_log_hd.h).
using explog::exp_f32;
using explog::log_f32;
using hd::bits_of;
using hd::div_rn;
using hd::fma_rn;
using hd::from_bits;
using hd::infinity;
using hd::pow2i;
using hd::quiet_nan;
using hd::sqrt_rn;

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
