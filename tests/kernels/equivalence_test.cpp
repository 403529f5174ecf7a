// Every optimized kernel equals the scalar reference bit for bit, for every ISA this
// CPU runs and thread counts {1, 2, 3, 8}; batch invariance of linear; attention
// independent of how the KV cache was filled and of the block size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
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
using testing::random_bf16;
using testing::random_f16;
using testing::random_floats;
using testing::same_bits;

TEST(Isa, EveryIsaThisCpuRunsIsTested) {
  std::string names;
  for (Isa isa : available_isas()) names += std::string(" ") + to_string(isa);
  std::printf("ISAs under test:%s (default %s)\n", names.c_str(), to_string(active_isa()));
  const core::CpuFeatures& f = core::cpu_features();
  EXPECT_EQ(isa_supported(Isa::kAvx512), f.avx512f && f.avx512vl && f.avx2 && f.fma && f.f16c);
  EXPECT_EQ(isa_supported(Isa::kAvx2), f.avx2 && f.fma && f.f16c);
  EXPECT_TRUE(isa_supported(Isa::kScalar));
}

constexpr int kThreadCounts[] = {1, 2, 3, 8};

// Weights of the given dtype plus their exact f32 widening (what the reference reads).
struct Weights {
  std::vector<float> f32;
  std::vector<std::uint16_t> half;
  const void* data() const {
    return half.empty() ? static_cast<const void*>(f32.data()) : half.data();
  }
};

Weights make_weights(core::DType dtype, std::int64_t n, std::int64_t k, std::uint64_t stream) {
  Weights w;
  if (dtype == core::DType::kF32) {
    w.f32 = random_floats(n * k, stream);
    return w;
  }
  w.half = dtype == core::DType::kBF16 ? random_bf16(n * k, stream) : random_f16(n * k, stream);
  w.f32.resize(w.half.size());
  for (std::size_t i = 0; i < w.half.size(); ++i)
    w.f32[i] = dtype == core::DType::kBF16 ? bf16_to_f32(w.half[i]) : f16_to_f32(w.half[i]);
  return w;
}

struct LinearShape {
  std::int64_t m, n, k;
};

TEST(Linear, EqualsReferenceForEveryIsaThreadCountAndDtype) {
  IsaGuard guard;
  const LinearShape shapes[] = {{1, 1, 1},
                                {1, 17, 63},
                                {2, 33, 64},
                                {5, 16, 65},
                                {7, 100, 130},
                                {1, 48, 896},
                                {13, 31, 300},
                                {64, 70, 200},
                                {97, 129, 77},
                                {3, 257, 1000},
                                {33, 300, 1100},
                                // M = 1 over whole panels: 4 at a time, then 3, 2 or 1,
                                // then a partial one (threads split the panels unevenly).
                                {1, 64, 70},
                                {1, 192, 129},
                                {1, 256, 64},
                                {1, 581, 200},
                                {1, 448, 896},
                                {1, 640, 1}};
  std::uint64_t stream = 100;
  for (core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    for (const LinearShape& s : shapes) {
      const Weights w = make_weights(dtype, s.n, s.k, ++stream);
      const std::vector<float> bias = random_floats(s.n, ++stream);
      // x with a row stride larger than k.
      const std::int64_t ldx = s.k + 3, ldy = s.n + 5;
      const std::vector<float> x = random_floats(s.m * ldx, ++stream);
      for (bool with_bias : {false, true}) {
        const float* b = with_bias ? bias.data() : nullptr;
        std::vector<float> want(s.m * ldy, -7.0f);
        ref::linear(x.data(), ldx, s.m, w.f32.data(), s.n, s.k, b, want.data(), ldy);
        const PackedLinear packed = PackedLinear::pack(w.data(), dtype, s.n, s.k, b);
        for (Isa isa : available_isas()) {
          set_isa(isa);
          for (int t : kThreadCounts) {
            std::vector<float> got(s.m * ldy, -7.0f);
            packed.run(x.data(), ldx, s.m, got.data(), ldy, pool_for(t));
            ASSERT_EQ(first_diff(got.data(), want.data(), s.m * ldy), -1)
                << to_string(dtype) << " m=" << s.m << " n=" << s.n << " k=" << s.k
                << " isa=" << to_string(isa) << " threads=" << t << " bias=" << with_bias;
          }
        }
      }
    }
  }
}

TEST(Linear, BatchInvariance) {
  IsaGuard guard;
  const std::int64_t n = 75, k = 333, mmax = 64;
  for (core::DType dtype : {core::DType::kF32, core::DType::kBF16}) {
    const Weights w = make_weights(dtype, n, k, 7);
    const PackedLinear packed = PackedLinear::pack(w.data(), dtype, n, k);
    const std::vector<float> x = random_floats(mmax * k, 8);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      std::vector<float> full(mmax * n);
      packed.run(x.data(), k, mmax, full.data(), n, pool_for(3));
      for (std::int64_t m = 1; m <= mmax; ++m) {
        std::vector<float> part(m * n);
        packed.run(x.data(), k, m, part.data(), n, pool_for(1 + m % 3));
        ASSERT_TRUE(same_bits(part.data(), full.data(), m * n))
            << "m=" << m << " isa=" << to_string(isa);
      }
    }
  }
}

// --- attention -----------------------------------------------------------------------

// A paged cache filled with a given token order: K/V rows for tokens 0..T-1 of
// num_kv_heads heads, placed in shuffled blocks of block_size.
struct PagedCache {
  std::int64_t block_size, num_kv_heads, head_dim;
  std::vector<float> k, v;
  std::vector<std::int32_t> table;

  PagedCache(std::int64_t tokens, std::int64_t bs, std::int64_t kvh, std::int64_t d)
      : block_size(bs), num_kv_heads(kvh), head_dim(d) {
    const std::int64_t blocks = (tokens + bs - 1) / bs;
    // Physical blocks in a scrambled order, with one unused block in front.
    for (std::int64_t b = 0; b < blocks; ++b)
      table.push_back(static_cast<std::int32_t>(1 + (b * 7) % blocks));
    k.assign((blocks + 1) * bs * kvh * d, 1e30f);  // poison: unused slots must not be read
    v = k;
  }
  // Writes token t's K/V (kvh * d floats each).
  void write(std::int64_t t, const float* kt, const float* vt) {
    const std::int64_t off =
        (table[t / block_size] * block_size + t % block_size) * num_kv_heads * head_dim;
    std::copy(kt, kt + num_kv_heads * head_dim, k.begin() + off);
    std::copy(vt, vt + num_kv_heads * head_dim, v.begin() + off);
  }
  PagedKvView view() const {
    return PagedKvView{
        k.data(),   v.data(),     table.data(), static_cast<std::int64_t>(table.size()),
        block_size, num_kv_heads, head_dim};
  }
};

struct AttnShape {
  std::int64_t tokens, heads, kv_heads, d, block;
};

TEST(Attention, EqualsReferenceForEveryIsaAndThreadCount) {
  IsaGuard guard;
  const AttnShape shapes[] = {{1, 1, 1, 8, 16},     {5, 2, 1, 16, 4},     {70, 4, 2, 64, 16},
                              {130, 14, 2, 64, 32}, {200, 3, 3, 24, 7},   {64, 8, 1, 128, 64},
                              {33, 6, 2, 40, 1},    {300, 2, 2, 64, 128}, {90, 12, 1, 64, 16},
                              {50, 20, 1, 32, 8}};
  std::uint64_t stream = 500;
  for (const AttnShape& s : shapes) {
    const std::int64_t kvw = s.kv_heads * s.d;
    const std::vector<float> kall = random_floats(s.tokens * kvw, ++stream, 2.0f);
    const std::vector<float> vall = random_floats(s.tokens * kvw, ++stream);
    PagedCache cache(s.tokens, s.block, s.kv_heads, s.d);
    for (std::int64_t t = 0; t < s.tokens; ++t) cache.write(t, &kall[t * kvw], &vall[t * kvw]);
    // Prefill-style: rows = the last min(tokens, 9) positions, causal key counts.
    const std::int64_t rows = std::min<std::int64_t>(s.tokens, 9);
    std::vector<std::int64_t> nk(rows);
    for (std::int64_t r = 0; r < rows; ++r) nk[r] = s.tokens - rows + 1 + r;
    const std::int64_t ldq = s.heads * s.d + 2;
    const std::vector<float> q = random_floats(rows * ldq, ++stream, 2.0f);
    const float scale = 1.0f / 8.0f;
    std::vector<float> want(rows * ldq, -3.0f);
    ref::attention(q.data(), ldq, rows, nk.data(), s.heads, cache.view(), scale, want.data(), ldq);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (int t : kThreadCounts) {
        std::vector<float> got(rows * ldq, -3.0f);
        attention(q.data(), ldq, rows, nk.data(), s.heads, cache.view(), scale, got.data(), ldq,
                  pool_for(t));
        ASSERT_EQ(first_diff(got.data(), want.data(), rows * ldq), -1)
            << "tokens=" << s.tokens << " heads=" << s.heads << "/" << s.kv_heads << " d=" << s.d
            << " isa=" << to_string(isa) << " threads=" << t;
        // Decode: the last row alone (threads may then split a kv head's query heads).
        const std::int64_t last = rows - 1;
        std::vector<float> one(ldq, -3.0f);
        attention(&q[last * ldq], ldq, 1, &nk[last], s.heads, cache.view(), scale, one.data(), ldq,
                  pool_for(t));
        ASSERT_EQ(first_diff(one.data(), &want[last * ldq], ldq), -1)
            << "decode tokens=" << s.tokens << " heads=" << s.heads << "/" << s.kv_heads
            << " isa=" << to_string(isa) << " threads=" << t;
      }
    }
  }
}

// The model's pattern: K/V of a chunk are written, then that chunk's rows attend. The
// outputs of every row must not depend on the chunking or the block size.
TEST(Attention, IndependentOfPrefillChunkingAndBlockSize) {
  IsaGuard guard;
  const std::int64_t tokens = 150, heads = 14, kvh = 2, d = 64;
  const std::int64_t kvw = kvh * d, qw = heads * d;
  const std::vector<float> kall = random_floats(tokens * kvw, 31, 2.0f);
  const std::vector<float> vall = random_floats(tokens * kvw, 32);
  const std::vector<float> q = random_floats(tokens * qw, 33, 2.0f);
  const float scale = 0.125f;
  auto run = [&](std::int64_t chunk, std::int64_t block) {
    PagedCache cache(tokens, block, kvh, d);
    std::vector<float> out(tokens * qw);
    for (std::int64_t t0 = 0; t0 < tokens; t0 += chunk) {
      const std::int64_t len = std::min(chunk, tokens - t0);
      for (std::int64_t t = t0; t < t0 + len; ++t) cache.write(t, &kall[t * kvw], &vall[t * kvw]);
      std::vector<std::int64_t> nk(len);
      for (std::int64_t r = 0; r < len; ++r) nk[r] = t0 + r + 1;
      attention(&q[t0 * qw], qw, len, nk.data(), heads, cache.view(), scale, &out[t0 * qw], qw,
                pool_for(static_cast<int>(1 + len % 3)));
    }
    return out;
  };
  for (Isa isa : available_isas()) {
    set_isa(isa);
    const std::vector<float> base = run(tokens, 16);
    for (std::int64_t chunk : {1, 7, 16, 64}) {
      for (std::int64_t block : {1, 5, 16, 64, 256}) {
        const std::vector<float> got = run(chunk, block);
        ASSERT_TRUE(same_bits(got.data(), base.data(), tokens * qw))
            << "chunk=" << chunk << " block=" << block << " isa=" << to_string(isa);
      }
    }
  }
}

// --- row ops -------------------------------------------------------------------------

// silu_mul on the values where a vector form could differ from scalar code: NaNs of both
// signs (-g is a sign flip, not 0 - g), infinities, signed zeros, subnormals, and
// magnitudes where exp(-g) overflows or underflows; every ISA, every tail length.
TEST(RowOps, SiluMulSpecialValuesEqualReferenceForEveryIsa) {
  IsaGuard guard;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> g = {std::nanf(""), -std::nanf(""), inf,   -inf,   0.0f,  -0.0f,
                          1e-40f,        -1e-40f,        88.0f, -88.0f, 89.0f, -104.0f,
                          1e30f,         -1e30f,         0.5f,  -3.0f};
  const std::vector<float> more = random_floats(40, 77, 50.0f);
  g.insert(g.end(), more.begin(), more.end());
  const std::vector<float> u = random_floats(static_cast<std::int64_t>(g.size()), 78);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (std::int64_t n = 1; n <= static_cast<std::int64_t>(g.size()); ++n) {
      std::vector<float> want(static_cast<std::size_t>(n)), got(want.size(), -1.0f);
      ref::silu_mul(g.data(), u.data(), want.data(), n);
      silu_mul(g.data(), u.data(), got.data(), n);
      ASSERT_TRUE(same_bits(got.data(), want.data(), n)) << to_string(isa) << " n=" << n;
    }
  }
}

TEST(RowOps, EqualReferenceForEveryIsa) {
  IsaGuard guard;
  for (std::int64_t n : {1, 7, 64, 65, 200, 300, 896, 5000}) {
    const std::vector<float> x = random_floats(3 * n, 40 + n, 6.0f);
    const std::vector<float> u = random_floats(n, 41 + n);
    const std::vector<float> w = random_floats(n, 42 + n);
    std::vector<float> want(3 * n), got(3 * n);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (std::int64_t r = 0; r < 3; ++r)
        ref::rms_norm(&x[r * n], w.data(), 1e-6f, &want[r * n], n);
      for (int t : kThreadCounts) {
        rms_norm(x.data(), n, w.data(), 1e-6f, got.data(), n, 3, n, pool_for(t));
        ASSERT_TRUE(same_bits(got.data(), want.data(), 3 * n)) << "rms_norm n=" << n;
      }
      ASSERT_EQ(dot(x.data(), u.data(), n), ref::dot(x.data(), u.data(), n)) << n;
      ASSERT_EQ(sum(x.data(), n), ref::sum(x.data(), n)) << n;
      float means[3];
      mean_rows(x.data(), n, 3, n, means);
      for (std::int64_t r = 0; r < 3; ++r)
        ASSERT_EQ(means[r], ref::sum(&x[r * n], n) / static_cast<float>(n)) << n;
      ref::silu_mul(x.data(), u.data(), want.data(), n);
      silu_mul(x.data(), u.data(), got.data(), n);
      ASSERT_TRUE(same_bits(got.data(), want.data(), n)) << "silu_mul n=" << n;
      ref::softmax(x.data(), want.data(), n);
      softmax(x.data(), got.data(), n);
      ASSERT_TRUE(same_bits(got.data(), want.data(), n)) << "softmax n=" << n;
      ref::log_softmax(x.data(), want.data(), n);
      log_softmax(x.data(), got.data(), n);
      ASSERT_TRUE(same_bits(got.data(), want.data(), n)) << "log_softmax n=" << n;
      if (n % 2 == 0) {
        const std::vector<float> c = random_floats(n / 2, 43), s = random_floats(n / 2, 44);
        std::vector<float> a = x, b = x;
        for (std::int64_t r = 0; r < 3; ++r) ref::rope(&a[r * n], n, c.data(), s.data());
        rope(b.data(), 3, n, n, c.data(), s.data());
        ASSERT_TRUE(same_bits(a.data(), b.data(), 3 * n)) << "rope n=" << n;
      }
    }
  }
}

// argmax equals the reference on every ISA: the lowest index of the largest value, with
// the maximum at every position of every length (heads, vector bodies, tails), ties
// (repeated maxima, -0 against +0, all -inf), and a NaN anywhere an error.
TEST(RowOps, ArgmaxEqualsReferenceForEveryIsa) {
  IsaGuard guard;
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (std::int64_t n : {1, 2, 15, 16, 17, 31, 33, 64, 100, 1000}) {
      std::vector<float> x = random_floats(n, 90 + n, 4.0f);
      for (std::int64_t at = 0; at < n; at += (n > 40 ? 7 : 1)) {
        std::vector<float> y = x;
        y[at] = 9.0f;
        ASSERT_EQ(argmax(y.data(), n), at) << to_string(isa) << " n=" << n;
        y[n - 1] = 9.0f;  // a tie later on: still the first
        ASSERT_EQ(argmax(y.data(), n), at) << to_string(isa) << " n=" << n;
        for (float& v : y) v = -inf;
        ASSERT_EQ(argmax(y.data(), n), 0) << to_string(isa) << " n=" << n;
        y[at] = -0.0f;
        if (at + 1 < n) y[n - 1] = 0.0f;  // -0 == +0: the first of them
        ASSERT_EQ(argmax(y.data(), n), ref::argmax(y.data(), n)) << to_string(isa) << n;
        ASSERT_EQ(argmax(y.data(), n), at) << to_string(isa) << " n=" << n;
        y = x;
        y[at] = std::nanf("");
        try {
          argmax(y.data(), n);
          FAIL() << to_string(isa) << " accepted a NaN at " << at << " of " << n;
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
          EXPECT_NE(std::string(e.what()).find("index " + std::to_string(at)), std::string::npos)
              << e.what();
        }
      }
      ASSERT_EQ(argmax(x.data(), n), ref::argmax(x.data(), n)) << to_string(isa) << n;
    }
  }
}

// max_value equals the reference's bits on every ISA: the largest value anywhere (heads,
// vector bodies, tails), -0 against +0 in either order (the first of them), NaNs skipped
// unless x[0] is one, all -inf.
TEST(RowOps, MaxValueEqualsReferenceForEveryIsa) {
  IsaGuard guard;
  const float inf = std::numeric_limits<float>::infinity();
  const auto same = [](float a, float b) {
    std::uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    return ua == ub || (a != a && b != b);
  };
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (std::int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 100, 1000}) {
      const std::vector<float> x = random_floats(n, 190 + n, 4.0f);
      ASSERT_TRUE(same(max_value(x.data(), n), ref::max_value(x.data(), n))) << n;
      for (std::int64_t at = 0; at < n; at += (n > 40 ? 7 : 1)) {
        std::vector<float> y = x;
        y[at] = 9.0f;
        ASSERT_EQ(max_value(y.data(), n), 9.0f) << to_string(isa) << " n=" << n;
        for (const float first : {-0.0f, 0.0f}) {
          for (float& v : y) v = -1.0f - std::fabs(v);
          y[at] = first;
          if (at + 1 < n) y[n - 1] = -first;
          if (at + 15 < n) y[at + 15] = -first;  // a lower lane, a later index
          const float got = max_value(y.data(), n);
          ASSERT_TRUE(same(got, ref::max_value(y.data(), n))) << to_string(isa) << " n=" << n;
          ASSERT_EQ(std::signbit(got), std::signbit(first)) << to_string(isa) << " n=" << n;
        }
        for (float& v : y) v = -inf;
        ASSERT_EQ(max_value(y.data(), n), -inf) << to_string(isa) << " n=" << n;
        y = x;
        y[at] = std::nanf("");
        const float got = max_value(y.data(), n);
        ASSERT_TRUE(same(got, ref::max_value(y.data(), n))) << to_string(isa) << " at=" << at;
        ASSERT_EQ(got != got, at == 0) << to_string(isa) << " n=" << n << " at=" << at;
      }
    }
  }
}

// kernels::add (residual adds, the folds of chunk partials): every ISA one binary32 add
// per element, tails included, with signed zeros, infinities and NaNs, into a third array
// and in place over either operand.
TEST(RowOps, AddEqualsScalarAddsForEveryIsa) {
  IsaGuard guard;
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (std::int64_t n : {1, 7, 8, 15, 16, 17, 64, 100}) {
      std::vector<float> a = random_floats(n, 300 + n, 3.0f);
      std::vector<float> b = random_floats(n, 400 + n, 3.0e-3f);
      b[0] = -a[0];  // +0
      if (n > 2) {
        a[n - 1] = b[n - 1] = -0.0f;  // -0
        b[1] = inf;
        a[1] = -inf;  // NaN
      }
      std::vector<float> want(a);
      for (std::int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
      const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
      std::vector<float> out(a.size(), -5.0f), in_a(a), in_b(b);
      add(a.data(), b.data(), out.data(), n);
      add(in_a.data(), b.data(), in_a.data(), n);
      add(a.data(), in_b.data(), in_b.data(), n);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), bytes), 0) << to_string(isa) << " n=" << n;
      ASSERT_EQ(std::memcmp(in_a.data(), want.data(), bytes), 0) << to_string(isa) << " n=" << n;
      ASSERT_EQ(std::memcmp(in_b.data(), want.data(), bytes), 0) << to_string(isa) << " n=" << n;
    }
  }
}

TEST(RowOps, VectorExpEqualsScalarOnDenseSample) {
  IsaGuard guard;
  // Every 61st bit pattern: all finite values, infinities, NaNs, subnormals.
  std::vector<float> x;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 61 * 16) {
    std::uint32_t u = static_cast<std::uint32_t>(b);
    float f;
    std::memcpy(&f, &u, sizeof f);
    x.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 89.0f, -104.0f, 88.7f, -103.9f}) x.push_back(f);
  std::vector<float> want(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = ref::exp_f32(x[i]);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    exp_n(x.data(), got.data(), static_cast<std::int64_t>(x.size()));
    const std::int64_t i = first_diff(got.data(), want.data(), static_cast<std::int64_t>(x.size()));
    ASSERT_EQ(i, -1) << "isa=" << to_string(isa) << " x=" << (i >= 0 ? x[i] : 0.0f);
  }
}

TEST(Errors, BadArgumentsAreErrorsNotCrashes) {
  const std::vector<float> w = random_floats(16, 1);
  EXPECT_THROW(PackedLinear::pack(nullptr, core::DType::kF32, 4, 4), Error);
  EXPECT_THROW(PackedLinear::pack(w.data(), core::DType::kF32, 0, 4), Error);
  const PackedLinear packed = PackedLinear::pack(w.data(), core::DType::kF32, 4, 4);
  float y[4];
  EXPECT_THROW(packed.run(w.data(), 3, 1, y, 4, nullptr), Error);  // ldx < k
  EXPECT_THROW(PackedLinear().run(w.data(), 4, 1, y, 4, nullptr), Error);
  PagedCache cache(4, 4, 2, 8);
  const std::int64_t too_many = 5, ok = 4;
  std::vector<float> q(3 * 8), out(3 * 8);
  // 3 query heads do not divide into 2 kv heads; 5 keys exceed the block table.
  EXPECT_THROW(attention(q.data(), 24, 1, &ok, 3, cache.view(), 1.0f, out.data(), 24, nullptr),
               Error);
  EXPECT_THROW(
      attention(q.data(), 16, 1, &too_many, 2, cache.view(), 1.0f, out.data(), 16, nullptr), Error);
}

}  // namespace
}  // namespace detinfer::kernels
