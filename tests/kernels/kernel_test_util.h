// Random test data for the kernel tests: Philox-driven, fixed seeds, never zero.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "detinfer/philox.h"

namespace detinfer::kernels::testing {

// Uniform non-zero floats in [-scale, scale), stream-addressed so every buffer is
// reproducible on its own.
inline std::vector<float> random_floats(std::int64_t n, std::uint64_t stream, float scale = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const PhiloxCounter b = philox_block(1234, stream, static_cast<std::uint64_t>(i));
    float u = uniform01(b[0]) * 2.0f - 1.0f;
    if (u == 0.0f) u = 0.5f;
    v[static_cast<std::size_t>(i)] = u * scale;
  }
  return v;
}

// Raw 16-bit weights: bf16 = the top half of a random float; f16 = a random normal
// half in about [-8, 8].
inline std::vector<std::uint16_t> random_bf16(std::int64_t n, std::uint64_t stream) {
  const std::vector<float> f = random_floats(n, stream);
  std::vector<std::uint16_t> v(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &f[i], sizeof u);
    v[i] = static_cast<std::uint16_t>(u >> 16);
  }
  return v;
}

inline std::vector<std::uint16_t> random_f16(std::int64_t n, std::uint64_t stream) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const PhiloxCounter b = philox_block(99, stream, static_cast<std::uint64_t>(i));
    const std::uint32_t sign = (b[0] & 1u) << 15;
    const std::uint32_t exp = 3u + b[1] % 15u;  // 2^-12 .. 2^2, some tiny values
    const std::uint32_t mant = b[2] & 0x3ffu;
    v[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(sign | (exp << 10) | mant);
  }
  return v;
}

inline bool same_bits(const float* a, const float* b, std::int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

// Index of the first differing float, or -1.
inline std::int64_t first_diff(const float* a, const float* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return i;
  return -1;
}

// Index of the first float whose bits differ, except that any NaN equals any NaN (NaN
// payloads are not part of the spec), or -1.
inline std::int64_t first_mismatch(const float* got, const float* want, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (got[i] != got[i] && want[i] != want[i]) continue;
    if (std::memcmp(got + i, want + i, sizeof(float)) != 0) return i;
  }
  return -1;
}

}  // namespace detinfer::kernels::testing
