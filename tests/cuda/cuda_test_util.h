// Helpers for the CUDA kernel tests: the no-device skip, deterministic random data
// (Philox, fixed seeds, never zeros) and host<->device copies.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "detinfer/philox.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_math.h"

namespace detinfer::kernels::cuda::test {

// Every GPU test starts with this: without a device the test is skipped, saying why.
#define DETINFER_REQUIRE_CUDA_DEVICE()                                                             \
  do {                                                                                             \
    if (::detinfer::kernels::cuda::device_count() == 0)                                            \
      GTEST_SKIP() << "skipped: no CUDA device (" << ::detinfer::kernels::cuda::no_device_reason() \
                   << ")";                                                                         \
  } while (0)

// Uniform in [lo, hi), never exactly zero; a pure function of (seed, n).
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float u = philox_uniform(seed, 0, i / 4, static_cast<std::uint32_t>(i % 4));
    float x = lo + (hi - lo) * u;
    if (x == 0.0f) x = 0.5f * hi;
    v[i] = x;
  }
  return v;
}

// A random integer in [0, n).
inline std::int64_t random_index(std::uint64_t seed, std::uint64_t i, std::int64_t n) {
  return static_cast<std::int64_t>(::detinfer::philox_bits(seed, 1, i, 0) %
                                   static_cast<std::uint64_t>(n));
}

// bf16 bits of each value (round to nearest even).
inline std::vector<std::uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<std::uint16_t> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = dm::f32_to_bf16(x[i]);
  return v;
}

// Random f16 bit patterns of moderate magnitude (2^-5 .. 2^3), both signs.
inline std::vector<std::uint16_t> random_f16(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t b = philox_bits(seed, 2, i, 0);
    const std::uint32_t exp = 10 + (b >> 16) % 8;
    v[i] = static_cast<std::uint16_t>(((b >> 31) << 15) | (exp << 10) | (b & 0x3ffu));
  }
  return v;
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer& b, std::size_t n) {
  std::vector<T> v(n);
  b.download(v.data(), n * sizeof(T));
  return v;
}

// Index of the first element whose bits differ, or -1.
template <typename T>
std::int64_t first_bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace detinfer::kernels::cuda::test
