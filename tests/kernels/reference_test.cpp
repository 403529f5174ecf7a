// The scalar reference (numerics spec v1) against float64 and the IEEE facts it
// promises: exp/log within 2 ulp over the whole float domain, exact special cases,
// exact widening, and accuracy of the reductions.
#include "kernels/reference/reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "detinfer/error.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace detinfer::kernels {
namespace {

using testing::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Position of a float on the ordered line of all floats (+0 and -0 both at 0).
std::int64_t ordinal(float f) {
  std::int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? -static_cast<std::int64_t>(i & 0x7fffffff) : i;
}

std::int64_t ulp_distance(float a, float b) {
  const std::int64_t d = ordinal(a) - ordinal(b);
  return d < 0 ? -d : d;
}

struct UlpStats {
  std::int64_t max_ulp = 0;
  float worst_x = 0.0f;
  std::int64_t samples = 0;
};

template <typename F, typename G>
UlpStats scan_domain(F ours, G exact, float lo, float hi) {
  UlpStats st;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 97) {
    const float x = from_bits(static_cast<std::uint32_t>(b));
    if (!(x >= lo && x <= hi)) continue;
    const float want = static_cast<float>(exact(static_cast<double>(x)));
    const float got = ours(x);
    const std::int64_t d = ulp_distance(got, want);
    ++st.samples;
    if (d > st.max_ulp) {
      st.max_ulp = d;
      st.worst_x = x;
    }
  }
  return st;
}

TEST(ExpLog, ExpWithinTwoUlpOnDenseSample) {
  // Whole domain where exp is finite and non-zero, plus the overflow/underflow edges.
  const UlpStats st = scan_domain([](float x) { return ref::exp_f32(x); },
                                  [](double x) { return std::exp(x); }, -110.0f, 100.0f);
  EXPECT_GT(st.samples, 10000000);
  EXPECT_LE(st.max_ulp, 2) << "worst x = " << st.worst_x;
  std::printf("exp_f32: max error %lld ulp over %lld samples\n", static_cast<long long>(st.max_ulp),
              static_cast<long long>(st.samples));
}

TEST(ExpLog, LogWithinTwoUlpOnDenseSample) {
  const UlpStats st =
      scan_domain([](float x) { return ref::log_f32(x); }, [](double x) { return std::log(x); },
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max());
  EXPECT_GT(st.samples, 10000000);
  EXPECT_LE(st.max_ulp, 2) << "worst x = " << st.worst_x;
  std::printf("log_f32: max error %lld ulp over %lld samples\n", static_cast<long long>(st.max_ulp),
              static_cast<long long>(st.samples));
}

TEST(ExpLog, ExactSpecialCases) {
  EXPECT_EQ(ref::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(ref::exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(ref::exp_f32(-kInf), 0.0f);
  EXPECT_FALSE(std::signbit(ref::exp_f32(-kInf)));
  EXPECT_EQ(ref::exp_f32(kInf), kInf);
  EXPECT_EQ(ref::exp_f32(89.0f), kInf);
  EXPECT_EQ(ref::exp_f32(1000.0f), kInf);
  EXPECT_EQ(ref::exp_f32(-104.0f), 0.0f);
  EXPECT_EQ(ref::exp_f32(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isnan(ref::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(ref::log_f32(1.0f), 0.0f);
  EXPECT_EQ(ref::log_f32(0.0f), -kInf);
  EXPECT_EQ(ref::log_f32(-0.0f), -kInf);
  EXPECT_EQ(ref::log_f32(kInf), kInf);
  EXPECT_TRUE(std::isnan(ref::log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(ref::log_f32(-kInf)));
  EXPECT_TRUE(std::isnan(ref::log_f32(std::numeric_limits<float>::quiet_NaN())));
  // The dispatching entry points are the reference.
  EXPECT_EQ(exp_f32(0.5f), ref::exp_f32(0.5f));
  EXPECT_EQ(log_f32(0.5f), ref::log_f32(0.5f));
}

TEST(Conversions, WideningIsExact) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    // bf16: the top half of a binary32.
    const float b = bf16_to_f32(bits);
    std::uint32_t u;
    std::memcpy(&u, &b, sizeof u);
    ASSERT_EQ(u, h << 16);
    // f16: value = (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for subnormals.
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    const float f = f16_to_f32(bits);
    if (e == 31) {
      if (m == 0) {
        ASSERT_EQ(f, static_cast<float>(sign * kInf));
      } else {
        ASSERT_TRUE(std::isnan(f));
      }
    } else {
      const double want = e == 0 ? sign * std::ldexp(m, -24) : sign * std::ldexp(1024 + m, e - 25);
      ASSERT_EQ(static_cast<double>(f), want) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0);
    }
  }
}

double dot64(const float* a, const float* b, std::int64_t k) {
  double s = 0;
  for (std::int64_t i = 0; i < k; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(Accuracy, LinearVsFloat64) {
  // Positive inputs keep the relative error meaningful (no cancellation).
  const std::int64_t m = 3, n = 37, k = 1000;
  std::vector<float> x = random_floats(m * k, 1), w = random_floats(n * k, 2);
  for (float& v : x) v = std::fabs(v);
  for (float& v : w) v = std::fabs(v);
  std::vector<float> y(m * n);
  ref::linear(x.data(), k, m, w.data(), n, k, nullptr, y.data(), n);
  double worst = 0;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      const double want = dot64(&x[r * k], &w[j * k], k);
      worst = std::max(worst, std::fabs(y[r * n + j] - want) / std::fabs(want));
    }
  EXPECT_LE(worst, 1e-5);
}

TEST(Accuracy, RmsNormVsFloat64) {
  const std::int64_t n = 896;
  const std::vector<float> x = random_floats(n, 3, 4.0f), w = random_floats(n, 4);
  std::vector<float> y(n);
  ref::rms_norm(x.data(), w.data(), 1e-6f, y.data(), n);
  const double r = 1.0 / std::sqrt(dot64(x.data(), x.data(), n) / n + 1e-6);
  for (std::int64_t i = 0; i < n; ++i) {
    const double want = x[i] * r * w[i];
    EXPECT_LE(std::fabs(y[i] - want), 1e-5 * std::fabs(want)) << i;
  }
}

TEST(Accuracy, SoftmaxAndLogSoftmaxVsFloat64) {
  const std::int64_t n = 5000;
  const std::vector<float> x = random_floats(n, 5, 8.0f);
  std::vector<float> p(n), lp(n);
  ref::softmax(x.data(), p.data(), n);
  ref::log_softmax(x.data(), lp.data(), n);
  double m = x[0];
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(v - m);
  for (std::int64_t i = 0; i < n; ++i) {
    const double want = std::exp(x[i] - m) / s;
    EXPECT_LE(std::fabs(p[i] - want), 1e-5 * want) << i;
    const double lwant = (x[i] - m) - std::log(s);
    EXPECT_LE(std::fabs(lp[i] - lwant), 1e-5 * std::fabs(lwant) + 1e-6) << i;
  }
}

TEST(Accuracy, AttentionVsFloat64) {
  const std::int64_t d = 64, t = 300, bs = 16;
  const std::vector<float> q = random_floats(d, 6), k = random_floats(t * d, 7),
                           v = random_floats(t * d, 8);
  std::vector<std::int32_t> table((t + bs - 1) / bs);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  PagedKvView kv{k.data(), v.data(), table.data(), static_cast<std::int64_t>(table.size()), bs,
                 1,        d};
  std::vector<float> out(d);
  const float scale = 0.125f;
  ref::attention_head(q.data(), t, 0, kv, scale, out.data());
  std::vector<double> sc(t);
  double m = -1e300, den = 0;
  for (std::int64_t j = 0; j < t; ++j)
    m = std::max(m, sc[j] = dot64(q.data(), &k[j * d], d) * scale);
  for (std::int64_t j = 0; j < t; ++j) den += sc[j] = std::exp(sc[j] - m);
  for (std::int64_t c = 0; c < d; ++c) {
    double num = 0;
    for (std::int64_t j = 0; j < t; ++j) num += sc[j] * v[j * d + c];
    EXPECT_NEAR(out[c], num / den, 1e-5) << c;
  }
}

TEST(Argmax, TiesToLowestIndexAndNaNIsAnError) {
  const float x[] = {1.0f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(ref::argmax(x, 4), 1);
  EXPECT_EQ(argmax(x, 4), 1);
  const float y[] = {-kInf, -kInf};
  EXPECT_EQ(argmax(y, 2), 0);
  const float z[] = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  try {
    argmax(z, 3);
    FAIL() << "argmax accepted a NaN";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_THROW(argmax(x, 0), Error);
}

TEST(Reductions, ChunkedOrderIsTheSpec) {
  // 1e8 + 64 ones: within the first chunk the ones are lost one by one (fma into a large
  // partial), so the chunk order is visible in the result.
  std::vector<float> x(130, 1.0f);
  x[0] = 1e8f;
  float p0 = 0.0f;
  for (int i = 0; i < 64; ++i) p0 = p0 + x[i];
  float p1 = 0.0f;
  for (int i = 64; i < 128; ++i) p1 = p1 + x[i];
  const float p2 = x[128] + x[129];
  EXPECT_EQ(ref::sum(x.data(), 130), ((0.0f + p0) + p1) + p2);
  EXPECT_EQ(sum(x.data(), 130), ref::sum(x.data(), 130));
  std::vector<float> ones(130, 1.0f);
  EXPECT_EQ(ref::dot(x.data(), ones.data(), 130), ref::sum(x.data(), 130));
  // Mean of rows.
  float mean[2];
  std::vector<float> rows(260, 2.0f);
  mean_rows(rows.data(), 130, 2, 130, mean);
  EXPECT_EQ(mean[0], 2.0f);
  EXPECT_EQ(mean[1], 2.0f);
}

}  // namespace
}  // namespace detinfer::kernels
