#include "detinfer/philox.h"

#include "core/check.h"

namespace detinfer {

namespace {
constexpr std::uint32_t kM0 = 0xD2511F53u;
constexpr std::uint32_t kM1 = 0xCD9E8D57u;
constexpr std::uint32_t kW0 = 0x9E3779B9u;
constexpr std::uint32_t kW1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}
}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) noexcept {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

PhiloxCounter philox_block(std::uint64_t seed, std::uint64_t stream, std::uint64_t step) noexcept {
  const PhiloxKey key = {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const PhiloxCounter ctr = {
      static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32),
      static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
  return philox4x32_10(ctr, key);
}

std::uint32_t philox_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t step,
                          std::uint32_t lane) {
  if (lane > 3) fail(ErrorCode::kInvalidArgument, "philox lane must be 0..3, got ", lane);
  return philox_block(seed, stream, step)[lane];
}

float uniform01(std::uint32_t bits) noexcept {
  // 24 bits fit a binary32 significand exactly, and the scale is a power of two.
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}

float philox_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t step,
                     std::uint32_t lane) {
  return uniform01(philox_bits(seed, stream, step, lane));
}

}  // namespace detinfer
