// Test support for the ggml reference quantizers (reference/quant_kquantize.h): an
// independent float64 decoder of each block format, written from ggml's dequantize_row_*
// (value of element e from the block bytes), and fixed-seed test data (std::mt19937 with
// hand-written uniform / Box-Muller transforms).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace detinfer::kernels::testing {

inline double half_at(const std::uint8_t* p) {
  return static_cast<double>(f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8))));
}

// q4_1 (20 B) / q5_1 (24 B): d, m, [qh], qs; value = d * q + m.
inline std::vector<double> decode_q4_1(const std::uint8_t* b) {
  std::vector<double> y(32);
  const double d = half_at(b), m = half_at(b + 2);
  for (int e = 0; e < 32; ++e) {
    const int q = e < 16 ? (b[4 + e] & 0xF) : (b[4 + e - 16] >> 4);
    y[e] = d * q + m;
  }
  return y;
}

inline std::vector<double> decode_q5_1(const std::uint8_t* b) {
  std::vector<double> y(32);
  const double d = half_at(b), m = half_at(b + 2);
  const std::uint32_t qh =
      static_cast<std::uint32_t>(b[4]) | (static_cast<std::uint32_t>(b[5]) << 8) |
      (static_cast<std::uint32_t>(b[6]) << 16) | (static_cast<std::uint32_t>(b[7]) << 24);
  for (int e = 0; e < 32; ++e) {
    const int lo = e < 16 ? (b[8 + e] & 0xF) : (b[8 + e - 16] >> 4);
    const int q = lo | static_cast<int>(((qh >> e) & 1u) << 4);
    y[e] = d * q + m;
  }
  return y;
}

// q2_K (84 B): scales[16], qs[64], d, dmin; value = d * (sc & 15) * q - dmin * (sc >> 4).
inline std::vector<double> decode_q2_k(const std::uint8_t* b) {
  std::vector<double> y(256);
  const double d = half_at(b + 80), dmin = half_at(b + 82);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, j = (e % 128) / 32, l = e % 32;
    const int q = (b[16 + 32 * n + l] >> (2 * j)) & 3;
    const int sc = b[e / 16];
    y[e] = d * (sc & 0xF) * q - dmin * (sc >> 4);
  }
  return y;
}

// q3_K (110 B): hmask[32], qs[64], scales[12], d. The sixteen 6-bit scales unpacked as
// ggml does: four little-endian u32 words a0..a2 of the 12 bytes, kmask 0x03030303 /
// 0x0f0f0f0f shuffles, read as 16 signed bytes.
inline std::vector<double> decode_q3_k(const std::uint8_t* b) {
  std::uint32_t a[4] = {0, 0, 0, 0};
  for (int k = 0; k < 12; ++k) a[k / 4] |= static_cast<std::uint32_t>(b[96 + k]) << (8 * (k % 4));
  const std::uint32_t m1 = 0x03030303u, m2 = 0x0f0f0f0fu, t = a[2];
  const std::uint32_t w[4] = {
      (a[0] & m2) | (((t >> 0) & m1) << 4), (a[1] & m2) | (((t >> 2) & m1) << 4),
      ((a[0] >> 4) & m2) | (((t >> 4) & m1) << 4), ((a[1] >> 4) & m2) | (((t >> 6) & m1) << 4)};
  std::vector<double> y(256);
  const double d = half_at(b + 108);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
    const int sc = static_cast<int>((w[s / 4] >> (8 * (s % 4))) & 0xFFu) - 32;
    const int lo = (b[32 + 32 * n + l] >> (2 * j)) & 3;
    const bool hbit = ((b[l] >> (4 * n + j)) & 1) != 0;
    y[e] = d * sc * (lo - (hbit ? 0 : 4));
  }
  return y;
}

// ggml's get_scale_min_k4 (q4_K / q5_K scales[12]).
inline void scale_min_k4(int j, const std::uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// q4_K (144 B): d, dmin, scales[12], qs[128]; q5_K (176 B) adds qh[32] before qs.
inline std::vector<double> decode_q45_k(const std::uint8_t* b, bool five) {
  std::vector<double> y(256);
  const double d = half_at(b), dmin = half_at(b + 2);
  const std::uint8_t* qs = b + (five ? 48 : 16);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    int sc, m;
    scale_min_k4(s, b + 4, &sc, &m);
    const std::uint8_t byte = qs[32 * (s / 2) + l];
    int q = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    if (five) q += ((b[16 + l] >> s) & 1) * 16;
    y[e] = d * sc * q - dmin * m;
  }
  return y;
}

// q6_K (210 B): ql[128], qh[64], int8 scales[16], d; value = d * sc * (q - 32).
inline std::vector<double> decode_q6_k(const std::uint8_t* b) {
  std::vector<double> y(256);
  const double d = half_at(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, t = (e % 128) / 32, l = e % 32;
    const std::uint8_t lb = b[64 * n + l + 32 * (t & 1)];
    const int lo = t < 2 ? (lb & 0xF) : (lb >> 4);
    const int hi = (b[128 + 32 * n + l] >> (2 * t)) & 3;
    const int sc = static_cast<std::int8_t>(b[192 + e / 16]);
    y[e] = d * sc * ((lo | (hi << 4)) - 32);
  }
  return y;
}

// Fixed-seed data: uniform in (0, 1] from 24 random bits, standard normal by Box-Muller.
class KquantRng {
 public:
  explicit KquantRng(std::uint32_t seed) : gen_(seed) {}
  double uniform() { return (static_cast<double>(gen_() >> 8) + 1.0) * (1.0 / 16777216.0); }
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::uint32_t bits() { return gen_(); }

 private:
  std::mt19937 gen_;
};

// n standard normal floats times `scale`.
inline std::vector<float> normal_floats(KquantRng& rng, int n, double scale = 1.0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& f : v) f = static_cast<float>(rng.normal() * scale);
  return v;
}

// Golden blocks, built from std::mt19937 bits and exact binary32 arithmetic only (no libm),
// so every platform reproduces them; kind = seed % 6: uniform, roughly normal (sum of four
// uniforms), roughly normal scaled by 2^k per 16 values (k in [-6, 6]), multiples of 0.25
// (ties for every rounding), negatives only, roughly normal with one +-500 outlier.
inline std::vector<float> golden_block(std::uint32_t seed, int n) {
  std::mt19937 g(seed);
  auto u = [&g]() { return static_cast<float>(g() >> 8) * (1.0f / 16777216.0f); };
  auto gauss = [&u]() { return ((u() + u()) + (u() + u()) - 2.0f) * 1.75f; };
  std::vector<float> x(static_cast<std::size_t>(n));
  float group_scale = 1.0f;
  for (int i = 0; i < n; ++i) {
    switch (seed % 6) {
      case 0:
        x[i] = (u() - 0.5f) * 8.0f;
        break;
      case 1:
        x[i] = gauss();
        break;
      case 2:
        if (i % 16 == 0) group_scale = std::ldexp(1.0f, static_cast<int>(g() % 13) - 6);
        x[i] = gauss() * group_scale;
        break;
      case 3:
        x[i] = static_cast<float>(static_cast<int>(g() % 33) - 16) * 0.25f;
        break;
      case 4:
        x[i] = -(u() * 3.0f) - 0.01f;
        break;
      default:
        x[i] = gauss();
        break;
    }
  }
  if (seed % 6 == 5) x[g() % static_cast<std::uint32_t>(n)] = (seed % 4 < 2) ? 500.0f : -500.0f;
  return x;
}

// FNV-1a 64 of bytes, chained from h.
inline std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n,
                           std::uint64_t h = 14695981039346656037ull) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace detinfer::kernels::testing
