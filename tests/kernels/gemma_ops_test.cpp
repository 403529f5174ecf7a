// detinfer's own tanh against float64 std::tanh (ulp bound), GELU-tanh and soft-capping
// against their float64 definitions, and masked attention (sliding window, soft-capping)
// on every ISA and thread count against the scalar reference, bit for bit; a window's
// fold starts at its first visible key (docs/numerics.md "tanh", "Attention").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "detinfer/error.h"
#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"
#include "linear_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::first_diff;
using testing::IsaGuard;
using testing::pool_for;

// |got - want| in units of the binary32 ulp at want (rounded to binary32).
double ulp_error(float got, double want) {
  const auto w = static_cast<float>(want);
  if (w == 0.0f) return got == 0.0f ? 0.0 : 1e30;
  int e = 0;
  std::frexp(w, &e);
  return std::fabs(static_cast<double>(got) - want) / std::ldexp(1.0, std::max(e, -125) - 24);
}

TEST(Tanh, WithinThreeUlpOfFloat64EveryNinetySeventhPattern) {
  double worst = 0.0;
  float worst_x = 0.0f;
  for (std::uint64_t u = 0; u < 0x100000000ull; u += 97) {
    const auto b = static_cast<std::uint32_t>(u);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (std::isnan(x)) continue;
    const double e = ulp_error(tanh_f32(x), std::tanh(static_cast<double>(x)));
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
  }
  std::printf("tanh_f32: worst %.3f ulp at %a\n", worst, static_cast<double>(worst_x));
  EXPECT_LE(worst, 3.0) << "at " << worst_x;
}

TEST(Tanh, SpecialCasesAndOddSymmetry) {
  EXPECT_EQ(tanh_f32(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(tanh_f32(-0.0f)));
  EXPECT_EQ(tanh_f32(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(tanh_f32(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(tanh_f32(1e-30f), 1e-30f);
  for (float x : {0.1f, 0.49999997f, 0.5f, 1.0f, 3.0f, 9.5f, 40.0f}) {
    EXPECT_EQ(tanh_f32(-x), -tanh_f32(x)) << x;
    EXPECT_EQ(ref::tanh_f32(x), tanh_f32(x)) << x;
  }
}

TEST(GeluTanh, CloseToFloat64AndEqualToReference) {
  const std::vector<float> g = testing::random_floats(4096, 7, 8.0f);
  const std::vector<float> u = testing::random_floats(4096, 8, 2.0f);
  std::vector<float> got(g.size()), want(g.size());
  gelu_tanh_mul(g.data(), u.data(), got.data(), 4096);
  ref::gelu_tanh_mul(g.data(), u.data(), want.data(), 4096);
  EXPECT_EQ(first_diff(got.data(), want.data(), 4096), -1);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double gelu =
        0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(got[i], gelu * u[i], 1e-5 * (1.0 + std::fabs(gelu * u[i]))) << x;
  }
  std::vector<float> c = g;
  softcap(c.data(), 3.0f, 4096);
  for (std::size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(c[i], 3.0 * std::tanh(g[i] / 3.0), 1e-6 * 3.0) << g[i];
}

// K/V of `tokens` tokens in scrambled blocks, poison in the unused block.
struct Cache {
  std::int64_t bs, kvh, d;
  std::vector<float> k, v;
  std::vector<std::int32_t> table;
  Cache(std::int64_t tokens, std::int64_t bs_, std::int64_t kvh_, std::int64_t d_,
        std::uint64_t stream)
      : bs(bs_), kvh(kvh_), d(d_) {
    const std::int64_t blocks = (tokens + bs - 1) / bs;
    for (std::int64_t b = 0; b < blocks; ++b)
      table.push_back(static_cast<std::int32_t>(1 + (b * 7) % blocks));
    k = testing::random_floats((blocks + 1) * bs * kvh * d, stream, 2.0f);
    v = testing::random_floats((blocks + 1) * bs * kvh * d, stream + 1);
  }
  PagedKvView view() const {
    return PagedKvView{
        k.data(), v.data(), table.data(), static_cast<std::int64_t>(table.size()), bs, kvh, d};
  }
};

TEST(MaskedAttention, EqualsReferenceForEveryIsaThreadCountWindowAndCap) {
  IsaGuard guard;
  struct Shape {
    std::int64_t tokens, heads, kvh, d, bs, window;
  };
  const Shape shapes[] = {{40, 4, 2, 16, 4, 8},
                          {70, 2, 1, 64, 16, 64},
                          {300, 4, 2, 32, 16, 200},
                          {600, 2, 2, 64, 32, 260},
                          {33, 6, 3, 24, 1, 1},
                          {129, 8, 1, 40, 7, 65},
                          // rows split by keys over the threads (>= 1024 visible keys)
                          {2100, 4, 2, 32, 16, 1500},
                          {1600, 14, 2, 64, 16, 1100}};
  std::uint64_t stream = 900;
  for (const Shape& s : shapes) {
    const Cache cache(s.tokens, s.bs, s.kvh, s.d, ++stream);
    const std::int64_t rows = std::min<std::int64_t>(s.tokens, 9);
    std::vector<std::int64_t> nk(rows), first(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      nk[r] = s.tokens - rows + 1 + r;
      first[r] = std::max<std::int64_t>(0, nk[r] - s.window);
    }
    const std::int64_t ldq = s.heads * s.d + 3;
    const std::vector<float> q = testing::random_floats(rows * ldq, ++stream, 2.0f);
    for (const float cap : {0.0f, 1.5f, 50.0f}) {
      const AttentionMask mask{first.data(), cap};
      std::vector<float> want(rows * ldq, -3.0f);
      ref::attention_masked(q.data(), ldq, rows, nk.data(), mask, s.heads, cache.view(), 0.125f,
                            want.data(), ldq);
      for (Isa isa : available_isas()) {
        set_isa(isa);
        for (int t : {1, 2, 3, 8}) {
          std::vector<float> got(rows * ldq, -3.0f);
          attention(q.data(), ldq, rows, nk.data(), mask, s.heads, cache.view(), 0.125f, got.data(),
                    ldq, pool_for(t));
          ASSERT_EQ(first_diff(got.data(), want.data(), rows * ldq), -1)
              << "tokens=" << s.tokens << " window=" << s.window << " cap=" << cap
              << " isa=" << to_string(isa) << " threads=" << t;
          std::vector<float> one(ldq, -3.0f);  // decode: the last row alone
          attention(&q[(rows - 1) * ldq], ldq, 1, &nk[rows - 1], {&first[rows - 1], cap}, s.heads,
                    cache.view(), 0.125f, one.data(), ldq, pool_for(t));
          ASSERT_EQ(first_diff(one.data(), &want[(rows - 1) * ldq], ldq), -1)
              << "decode tokens=" << s.tokens << " isa=" << to_string(isa) << " threads=" << t;
        }
      }
    }
  }
}

// A window row equals plain causal attention over the visible keys alone, stored as a
// sequence of their own: the fold starts at the first visible key. No mask = first 0.
TEST(MaskedAttention, WindowEqualsAttentionOverTheVisibleKeysAlone) {
  const std::int64_t tokens = 200, window = 70, heads = 4, kvh = 2, d = 32;
  const Cache cache(tokens, 16, kvh, d, 77);
  Cache tail(window, 16, kvh, d, 78);  // keys tokens - window .. tokens - 1 at 0 .. window - 1
  const PagedKvView full = cache.view();
  for (std::int64_t t = 0; t < window; ++t) {
    for (std::int64_t c = 0; c < kvh * d; ++c) {
      const std::int64_t src = ref::kv_offset(full, tokens - window + t, 0) + c;
      const std::int64_t dst = (tail.table[t / 16] * 16 + t % 16) * kvh * d + c;
      tail.k[dst] = cache.k[src];
      tail.v[dst] = cache.v[src];
    }
  }
  const std::vector<float> q = testing::random_floats(heads * d, 79, 2.0f);
  const std::int64_t nk = tokens, first = tokens - window, nk_tail = window;
  std::vector<float> a(heads * d), b(heads * d), c(heads * d), e(heads * d);
  attention(q.data(), heads * d, 1, &nk, {&first, 0.0f}, heads, full, 0.1f, a.data(), heads * d,
            nullptr);
  attention(q.data(), heads * d, 1, &nk_tail, heads, tail.view(), 0.1f, b.data(), heads * d,
            nullptr);
  EXPECT_EQ(first_diff(a.data(), b.data(), heads * d), -1);
  const std::int64_t zero = 0;
  attention(q.data(), heads * d, 1, &nk, {&zero, 0.0f}, heads, full, 0.1f, c.data(), heads * d,
            nullptr);
  attention(q.data(), heads * d, 1, &nk, heads, full, 0.1f, e.data(), heads * d, nullptr);
  EXPECT_EQ(first_diff(c.data(), e.data(), heads * d), -1);
  EXPECT_NE(first_diff(a.data(), e.data(), heads * d), -1);  // the window changed the result
}

TEST(MaskedAttention, BadMasksAreErrors) {
  const Cache cache(10, 4, 1, 8, 5);
  const std::vector<float> q(8, 1.0f);
  std::vector<float> out(8);
  const std::int64_t nk = 10, bad_first = 11, neg = -1;
  EXPECT_THROW(attention(q.data(), 8, 1, &nk, {&bad_first, 0.0f}, 1, cache.view(), 1.0f, out.data(),
                         8, nullptr),
               Error);
  EXPECT_THROW(
      attention(q.data(), 8, 1, &nk, {&neg, 0.0f}, 1, cache.view(), 1.0f, out.data(), 8, nullptr),
      Error);
  EXPECT_THROW(attention(q.data(), 8, 1, &nk, {nullptr, -1.0f}, 1, cache.view(), 1.0f, out.data(),
                         8, nullptr),
               Error);
}

}  // namespace
}  // namespace detinfer::kernels
