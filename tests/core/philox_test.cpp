#include "detinfer/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "detinfer/error.h"

namespace detinfer {
namespace {

// Random123 known-answer vectors for philox4x32_10.
TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, DocumentedMapping) {
  const std::uint64_t seed = 0x299f31d0a4093822ull;
  const std::uint64_t stream = 0x0370734413198a2eull;
  const std::uint64_t step = 0x85a308d3243f6a88ull;
  const PhiloxCounter block = philox_block(seed, stream, step);
  EXPECT_EQ(block, (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
  for (std::uint32_t lane = 0; lane < 4; ++lane)
    EXPECT_EQ(philox_bits(seed, stream, step, lane), block[lane]);
  EXPECT_THROW(philox_bits(seed, stream, step, 4), Error);
}

TEST(Philox, Uniform01IsTop24BitsExact) {
  EXPECT_EQ(uniform01(0u), 0.0f);
  EXPECT_EQ(uniform01(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(uniform01(0x80000000u), 0.5f);
  EXPECT_EQ(uniform01(0x000000ffu), 0.0f);  // low 8 bits are dropped
}

TEST(Philox, StatisticalSanityOfAMillionUniforms) {
  constexpr int kN = 1000000;
  constexpr int kBins = 100;
  std::vector<int> bins(kBins, 0);
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    const float u =
        philox_uniform(42, 3, static_cast<std::uint64_t>(i / 4), static_cast<std::uint32_t>(i % 4));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    ++bins[static_cast<int>(u * kBins)];
  }
  const double mean = sum / kN;
  // Std. error of the mean is sqrt(1/12/N) ~ 2.9e-4; allow 5 sigma.
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12.0 / kN));
  double chi2 = 0;
  const double expected = static_cast<double>(kN) / kBins;
  for (int c : bins) chi2 += (c - expected) * (c - expected) / expected;
  // 99 degrees of freedom: the 99.99th percentile is about 157.
  EXPECT_LT(chi2, 157.0);
  EXPECT_GT(chi2, 50.0);  // suspiciously uniform data is a bug too
}

TEST(Philox, StreamsAndStepsAreIndependent) {
  EXPECT_NE(philox_bits(1, 0, 0, 0), philox_bits(1, 1, 0, 0));
  EXPECT_NE(philox_bits(1, 0, 0, 0), philox_bits(1, 0, 1, 0));
  EXPECT_NE(philox_bits(1, 0, 0, 0), philox_bits(2, 0, 0, 0));
  EXPECT_EQ(philox_bits(1, 5, 9, 2), philox_bits(1, 5, 9, 2));
}

}  // namespace
}  // namespace detinfer
