// Philox4x32-10 counter-based generator (Salmon et al., SC'11; Random123) and the
// stateless mapping detinfer uses for every random draw.
//
// A draw is a pure function of (seed, stream, step, lane): it can be recomputed
// anywhere — another thread, process, machine or a GPU — from those four numbers.
//   key     = { seed & 0xffffffff, seed >> 32 }
//   counter = { step & 0xffffffff, step >> 32, stream & 0xffffffff, stream >> 32 }
//   bits    = philox4x32_10(counter, key)[lane]        (lane in 0..3)
//   uniform = (bits >> 8) * 2^-24                      (in [0, 1), exactly representable)
// Sampling uses stream = sample index, step = generation step, lane 0 (docs/sampling.md).
#pragma once

#include <array>
#include <cstdint>

#include "detinfer/export.h"

namespace detinfer {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

// Ten rounds of Philox4x32 (M0=0xD2511F53, M1=0xCD9E8D57, W0=0x9E3779B9, W1=0xBB67AE85).
DETINFER_API PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) noexcept;

// The four 32-bit outputs for (seed, stream, step), per the mapping above.
DETINFER_API PhiloxCounter philox_block(std::uint64_t seed, std::uint64_t stream,
                                        std::uint64_t step) noexcept;

// One 32-bit draw; lane must be 0..3 (throws Error(kInvalidArgument) otherwise).
DETINFER_API std::uint32_t philox_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t step,
                                       std::uint32_t lane);

// The top 24 bits scaled by 2^-24: a float in [0, 1) with no rounding.
DETINFER_API float uniform01(std::uint32_t bits) noexcept;

// uniform01(philox_bits(seed, stream, step, lane)).
DETINFER_API float philox_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t step,
                                  std::uint32_t lane);

}  // namespace detinfer
