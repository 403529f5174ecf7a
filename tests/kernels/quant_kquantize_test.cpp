// ggml's reference quantizers (reference/quant_kquantize.h): every format's bytes, decoded
// by an independent float64 decoder (kquant_test_util.h), reproduce the input within a
// per-element bound and a measured RMS figure (worked examples and the llama.cpp golden bytes:
// quant_kquantize_examples_test.cpp); non-finite input and binary16 overflow fail; the result
// is a pure function of the input.
#include "kernels/reference/quant_kquantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference/quant_kquantize_detail.h"
#include "kquant_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::KquantRng;
using testing::normal_floats;

// One format: its quantizer and decoder, sizes, and the parameters of the error bound.
//   sub: values sharing one sub-block scale; steps: levels - 1 of a sub-block (for the
//   symmetric q3_K / q6_K the grid is [-nmax, nmax - 1]: 7 / 63 steps); asym: the format
//   has a min (the grid spans [min(x, 0), max(x, 0)], else [-|x|max, |x|max]); scale_steps:
//   the resolution of a sub-block scale relative to the block's largest (q2_K 15, q3_K 32,
//   q4_K / q5_K 63, q6_K 128; 0 for q4_1 / q5_1, whose scale is binary16 itself).
//   elem_factor, rms_limit: see ElementErrorWithinBound and GaussianRmsError.
struct Format {
  const char* name;
  bool (*quantize)(const float*, std::uint8_t*);
  std::vector<double> (*decode)(const std::uint8_t*);
  int values, bytes, sub, steps;
  bool asym;
  double scale_steps, elem_factor, rms_limit;
  int f16_mult;  // the largest integer multiplying a binary16 field (d and dmin / m) on decode
};

// gtest prints a parameter by name, not as raw bytes.
void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

std::vector<double> decode_q4_k(const std::uint8_t* b) { return testing::decode_q45_k(b, false); }
std::vector<double> decode_q5_k(const std::uint8_t* b) { return testing::decode_q45_k(b, true); }

// elem_factor: the bound in units of (sub-block grid step + block scale step), measured
// on the data below with a margin (see ElementErrorWithinBound). rms_limit: measured
// RMS(error) / RMS(x) on Gaussian blocks (in the comment) with about 15% margin.
const Format kFormats[] = {
    {"q4_1", ref::quantize_q4_1_block, testing::decode_q4_1, 32, 20, 32, 15, true, 0, 0.5, 0.089,
     16},  // measured RMS 0.0776, worst element 0.48
    {"q5_1", ref::quantize_q5_1_block, testing::decode_q5_1, 32, 24, 32, 31, true, 0, 0.5, 0.044,
     32},  // measured RMS 0.0384, worst element 0.46
    {"q2_K", ref::quantize_q2_k_block, testing::decode_q2_k, 256, 84, 16, 3, true, 15, 1.25, 0.34,
     60},  // measured RMS 0.2954, worst element 0.82
    {"q3_K", ref::quantize_q3_k_block, testing::decode_q3_k, 256, 110, 16, 7, false, 32, 1.25,
     0.173, 128},  // measured RMS 0.1502, worst element 0.67
    {"q4_K", ref::quantize_q4_k_block, decode_q4_k, 256, 144, 32, 15, true, 63, 1.25, 0.082,
     1008},  // measured RMS 0.0712, worst element 0.69
    {"q5_K", ref::quantize_q5_k_block, decode_q5_k, 256, 176, 32, 31, true, 63, 1.25, 0.041,
     2016},  // measured RMS 0.0359, worst element 0.68
    {"q6_K", ref::quantize_q6_k_block, testing::decode_q6_k, 256, 210, 16, 63, false, 128, 1.25,
     0.0206, 4096},  // measured RMS 0.0179, worst element 0.28
};

std::vector<std::uint8_t> quantize_ok(const Format& f, const std::vector<float>& x) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(f.bytes), 0xA5);
  EXPECT_TRUE(f.quantize(x.data(), out.data())) << f.name;
  return out;
}

// The blocks every round-trip test runs on (fixed seed): Gaussian, mixed magnitudes per
// sub-block (10^-3 .. 10^3), all equal, all zero, one zero sub-block, negatives only,
// positives only, one huge outlier, tiny values, and a wide uniform spread.
std::vector<std::vector<float>> test_blocks(const Format& f) {
  KquantRng rng(20261204u + static_cast<std::uint32_t>(f.values));
  std::vector<std::vector<float>> blocks;
  const int n = f.values;
  for (int r = 0; r < 24; ++r) blocks.push_back(normal_floats(rng, n));
  for (int r = 0; r < 24; ++r) {
    std::vector<float> x = normal_floats(rng, n);
    for (int s = 0; s < n; s += 16) {
      const double mag = std::pow(10.0, static_cast<int>(rng.bits() % 7) - 3);
      for (int i = s; i < s + 16; ++i) x[i] = static_cast<float>(x[i] * mag);
    }
    blocks.push_back(x);
  }
  for (const float c : {1.0f, -2.5f, 0.3f, 1e-4f}) blocks.push_back(std::vector<float>(n, c));
  blocks.push_back(std::vector<float>(n, 0.0f));
  for (int r = 0; r < 8; ++r) {
    std::vector<float> x = normal_floats(rng, n);
    for (int i = 0; i < 16; ++i) x[16 * (r % (n / 16)) + i] = 0.0f;  // one zero sub-block
    blocks.push_back(x);
    std::vector<float> neg = normal_floats(rng, n), pos = normal_floats(rng, n);
    for (float& v : neg) v = -std::fabs(v) - 0.01f;
    for (float& v : pos) v = std::fabs(v) * 3.0f + 1.0f;
    blocks.push_back(neg);
    blocks.push_back(pos);
    std::vector<float> out = normal_floats(rng, n);
    out[rng.bits() % static_cast<std::uint32_t>(n)] = (r % 2 ? -1.0f : 1.0f) * 1000.0f;
    blocks.push_back(out);
    blocks.push_back(normal_floats(rng, n, 1e-6));
    std::vector<float> wide(static_cast<std::size_t>(n));
    for (float& v : wide) v = static_cast<float>((rng.uniform() - 0.5) * 200.0);
    blocks.push_back(wide);
  }
  return blocks;
}

// The grid span of sub-block [s, s + sub): asymmetric max(x, 0) - min(x, 0) (q4_1 / q5_1:
// max - min), symmetric 2 * max |x|.
double span(const Format& f, const std::vector<float>& x, int s) {
  double lo = f.scale_steps == 0 ? x[s] : 0.0, hi = lo, amax = 0.0;
  for (int i = s; i < s + f.sub; ++i) {
    lo = std::min(lo, static_cast<double>(x[i]));
    hi = std::max(hi, static_cast<double>(x[i]));
    amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  }
  return f.asym ? hi - lo : 2.0 * amax;
}

class KQuant : public ::testing::TestWithParam<Format> {};

// Per element: |x - decoded| <= elem_factor * (span_j / steps + span_max / scale_steps) +
// 2^-10 * (|x|max + span_max) + 2^-25 * f16_mult.
// Why: after the scales are fixed, ggml re-rounds each value to the nearest level of its
// sub-block grid (step ~ span_j / steps): 0.5 step. q4_1 / q5_1 stop there (elem_factor
// 0.5). The K formats quantize each sub-block scale (and min) to scale_steps levels of the
// block's largest; that moves a sub-block's grid by <= 0.5 span_max / scale_steps, a
// sub-block whose scale rounds to 0 decodes to its min (or 0), an error <= its span <=
// span_max / scale_steps; and the scale search (rmin..rmin + nstep * rdelta, least-squares
// refits) may shrink the grid so the extreme values clamp, by up to ~1.5 steps. Hence a
// few units in the worst case; on these blocks the largest ratio measured is 0.82 (q2_K),
// so the K formats assert 1.25. The binary16 fields add a relative 2^-11 (normal range;
// the 2^-10 term) or an absolute 2^-25 (subnormal: half the spacing 2^-24) times the
// integer that multiplies them (f16_mult: levels x scale levels, plus the min's).
TEST_P(KQuant, ElementErrorWithinBound) {
  const Format& f = GetParam();
  double worst = 0.0;
  for (const std::vector<float>& x : test_blocks(f)) {
    const std::vector<double> y = f.decode(quantize_ok(f, x).data());
    double span_max = 0.0, amax = 0.0;
    for (int s = 0; s < f.values; s += f.sub) span_max = std::max(span_max, span(f, x, s));
    for (const float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
    for (int e = 0; e < f.values; ++e) {
      const int s = e - e % f.sub;
      const double unit = span(f, x, s) / f.steps + (f.scale_steps ? span_max / f.scale_steps : 0);
      const double err = std::fabs(static_cast<double>(x[e]) - y[e]);
      const double slack = std::ldexp(amax + span_max, -10) + std::ldexp(f.f16_mult, -25);
      ASSERT_LE(err, f.elem_factor * unit + slack)
          << f.name << " element " << e << " x=" << x[e] << " decoded=" << y[e];
      if (unit > 0) worst = std::max(worst, (err - slack) / unit);
    }
  }
  std::printf("%s: worst error / unit = %.3f\n", f.name, worst);
}

// RMS(error) / RMS(x) over 64 standard normal blocks; ordering of the formats below.
double gaussian_rms(const Format& f) {
  KquantRng rng(777u);
  double se = 0.0, sx = 0.0;
  for (int r = 0; r < 64; ++r) {
    const std::vector<float> x = normal_floats(rng, f.values);
    const std::vector<double> y = f.decode(quantize_ok(f, x).data());
    for (int e = 0; e < f.values; ++e) {
      se += (x[e] - y[e]) * (x[e] - y[e]);
      sx += static_cast<double>(x[e]) * x[e];
    }
  }
  return std::sqrt(se / sx);
}

TEST_P(KQuant, GaussianRmsError) {
  const Format& f = GetParam();
  const double rel = gaussian_rms(f);
  std::printf("%s: RMS error / RMS(x) = %.5f\n", f.name, rel);
  EXPECT_LT(rel, f.rms_limit) << f.name;
  EXPECT_GT(rel, f.rms_limit * 0.6) << f.name << ": suspiciously exact";
}

// More bits, less error: q6_K < q5_K < q4_K < q3_K < q2_K, and q5_1 < q4_1.
TEST(KQuantOrder, MoreBitsLessError) {
  double rel[7];
  for (int i = 0; i < 7; ++i) rel[i] = gaussian_rms(kFormats[i]);
  EXPECT_LT(rel[1], rel[0]);  // q5_1 < q4_1
  EXPECT_LT(rel[6], rel[5]);  // q6_K < q5_K
  EXPECT_LT(rel[5], rel[4]);  // q5_K < q4_K
  EXPECT_LT(rel[4], rel[3]);  // q4_K < q3_K
  EXPECT_LT(rel[3], rel[2]);  // q3_K < q2_K
}

TEST_P(KQuant, SameInputSameBytes) {
  const Format& f = GetParam();
  for (const std::vector<float>& x : test_blocks(f)) {
    const std::vector<std::uint8_t> a = quantize_ok(f, x);
    std::vector<float> copy = x;
    std::vector<std::uint8_t> b(static_cast<std::size_t>(f.bytes), 0x5A);
    ASSERT_TRUE(f.quantize(copy.data(), b.data()));
    ASSERT_EQ(a, b) << f.name;  // every byte written, independent of out's prior content
  }
}

TEST_P(KQuant, NonFiniteInputFails) {
  const Format& f = GetParam();
  KquantRng rng(5u);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(f.bytes));
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    for (const int at : {0, f.values / 2 + 3, f.values - 1}) {
      std::vector<float> x = normal_floats(rng, f.values);
      x[at] = bad;
      EXPECT_FALSE(f.quantize(x.data(), out.data())) << f.name << " " << bad << " at " << at;
    }
  }
}

// 1e30 (alone or in a Gaussian block, either sign) makes the binary16 scale overflow.
TEST_P(KQuant, HugeValueFails) {
  const Format& f = GetParam();
  KquantRng rng(6u);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(f.bytes));
  for (const float huge : {1e30f, -1e30f, 3e38f}) {
    std::vector<float> x = normal_floats(rng, f.values);
    x[7] = huge;
    EXPECT_FALSE(f.quantize(x.data(), out.data())) << f.name << " " << huge;
    std::vector<float> all(static_cast<std::size_t>(f.values), huge);
    EXPECT_FALSE(f.quantize(all.data(), out.data())) << f.name << " all " << huge;
  }
  // Large but representable: fine.
  std::vector<float> x = normal_floats(rng, f.values, 100.0);
  EXPECT_TRUE(f.quantize(x.data(), out.data())) << f.name;
}

// An all-zero block encodes to all-zero bytes in every format (d = m = dmin = 0, levels 0).
TEST_P(KQuant, ZeroBlockIsZeroBytes) {
  const Format& f = GetParam();
  const std::vector<std::uint8_t> out = quantize_ok(f, std::vector<float>(f.values, 0.0f));
  EXPECT_EQ(out, std::vector<std::uint8_t>(static_cast<std::size_t>(f.bytes), 0)) << f.name;
}

INSTANTIATE_TEST_SUITE_P(Formats, KQuant, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<Format>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace detinfer::kernels
