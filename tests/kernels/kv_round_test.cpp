// The KV storage rounding (docs/numerics.md, "KV storage"): f32 -> bf16 / f16 to nearest,
// ties to even, checked against the definition (the widened result is a nearest
// representable value, and on a tie the even one) over a sweep of the float domain, plus
// the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"

namespace detinfer::kernels {
namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// h is the rounding of x when no representable neighbour of h is nearer to x, and on a
// tie h's last bit is 0. `widen` is exact, so the distances are exact in double.
template <typename Widen>
void expect_nearest_even(float x, std::uint16_t h, Widen widen, const char* what) {
  const double w = widen(h);
  const double err = std::fabs(static_cast<double>(x) - w);
  for (int step : {-1, 1}) {
    const std::uint16_t n = static_cast<std::uint16_t>(h + step);
    const double wn = widen(n);
    if (std::isnan(wn) || std::isinf(wn) || ((n ^ h) & 0x8000u) != 0) continue;
    const double en = std::fabs(static_cast<double>(x) - wn);
    ASSERT_LE(err, en) << what << " x=" << x << " h=" << h << " neighbour " << n;
    if (err == en) {
      ASSERT_EQ(h & 1u, 0u) << what << " tie not to even, x=" << x;
    }
  }
}

TEST(KvRound, Bf16IsNearestEven) {
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 9973) {
    const float x = from_bits(static_cast<std::uint32_t>(u));
    const std::uint16_t h = f32_to_bf16_rne(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(h)));
      continue;
    }
    if (std::isinf(bf16_to_f32(h))) {
      EXPECT_GE(std::fabs(x), 0x1.ffp127f) << x;  // only past bf16's max + half an ulp
      continue;
    }
    expect_nearest_even(
        x, h, [](std::uint16_t b) { return static_cast<double>(bf16_to_f32(b)); }, "bf16");
  }
  // Ties: exactly between two bf16 values.
  EXPECT_EQ(f32_to_bf16_rne(from_bits(0x3f808000u)), 0x3f80u);  // to even (down)
  EXPECT_EQ(f32_to_bf16_rne(from_bits(0x3f818000u)), 0x3f82u);  // to even (up)
  EXPECT_EQ(f32_to_bf16_rne(std::numeric_limits<float>::max()), 0x7f80u);
  EXPECT_EQ(f32_to_bf16_rne(-0.0f), 0x8000u);
}

TEST(KvRound, F16IsNearestEven) {
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 9973) {
    const float x = from_bits(static_cast<std::uint32_t>(u));
    const std::uint16_t h = f32_to_f16_rne(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(h)));
      continue;
    }
    if (std::isinf(f16_to_f32(h))) {
      EXPECT_GE(std::fabs(x), 65520.0f) << x;
      continue;
    }
    expect_nearest_even(
        x, h, [](std::uint16_t b) { return static_cast<double>(f16_to_f32(b)); }, "f16");
  }
  EXPECT_EQ(f32_to_f16_rne(65504.0f), 0x7bffu);
  EXPECT_EQ(f32_to_f16_rne(65519.99f), 0x7bffu);
  EXPECT_EQ(f32_to_f16_rne(65520.0f), 0x7c00u);    // tie: to even = inf
  EXPECT_EQ(f32_to_f16_rne(0x1p-24f), 0x0001u);    // smallest subnormal
  EXPECT_EQ(f32_to_f16_rne(0x1p-25f), 0x0000u);    // tie: to even = 0
  EXPECT_EQ(f32_to_f16_rne(0x1.8p-24f), 0x0002u);  // tie 1.5 units: to even = 2
  EXPECT_EQ(f32_to_f16_rne(-0x1p-14f), 0x8400u);   // smallest normal
  EXPECT_EQ(f32_to_f16_rne(1.0f), 0x3c00u);
}

TEST(KvRound, RoundToDtypeWidensBack) {
  const float x[5] = {1.0f + 0x1p-9f, 3.14159265f, -2.5e-6f, 70000.0f, -0.0f};
  float y[5];
  round_to_dtype(x, y, 5, core::DType::kBF16);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], bf16_to_f32(f32_to_bf16_rne(x[i]))) << i;
  round_to_dtype(x, y, 5, core::DType::kF16);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], f16_to_f32(f32_to_f16_rne(x[i]))) << i;
  EXPECT_TRUE(std::isinf(y[3]));
  round_to_dtype(x, y, 5, core::DType::kF32);
  EXPECT_EQ(std::memcmp(x, y, sizeof x), 0);
}

}  // namespace
}  // namespace detinfer::kernels
