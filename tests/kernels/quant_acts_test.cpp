// The activation quantizer of the quantized linear (cpu::QuantizeActsFn): every variant
// (scalar, AVX2 vectors, also used on AVX-512 CPUs) gives ref::quantize_act_row's and
// ref::act_half_sums's bytes, on random rows and on the edge cases of the rounding
// (exact halves), of non-finite and zero blocks, of scales that round to binary16 zero or
// overflow it, and of row strides wider than k.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "detinfer/philox.h"
#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/kernels.h"
#include "kernels/linear_impl.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels {
namespace {

using testing::random_floats;

std::vector<std::pair<std::string, cpu::QuantizeActsFn>> variants() {
  std::vector<std::pair<std::string, cpu::QuantizeActsFn>> v = {
      {"scalar", cpu::quantize_acts_scalar()}};
  if (isa_supported(Isa::kAvx2)) v.emplace_back("avx2", cpu::quantize_acts_avx2());
  return v;
}

// The reference's bytes for m rows of k (row stride ldx): q, d and the half sums.
struct RefActs {
  std::vector<std::int8_t> q;
  std::vector<float> d;
  std::vector<std::int32_t> xs;
  RefActs(const std::vector<float>& x, std::int64_t ldx, std::int64_t m, std::int64_t k)
      : q(static_cast<std::size_t>(m * k)),
        d(static_cast<std::size_t>(m * (k / 32))),
        xs(static_cast<std::size_t>(m * (k / 16))) {
    const std::int64_t nb = k / 32;
    for (std::int64_t r = 0; r < m; ++r) {
      ref::quantize_act_row(x.data() + r * ldx, k, q.data() + r * k, d.data() + r * nb);
      ref::act_half_sums(q.data() + r * k, k, xs.data() + r * 2 * nb);
    }
  }
};

// Every variant against the reference on m rows of k (row stride ldx), bytes compared.
void expect_reference_bytes(const std::vector<float>& x, std::int64_t ldx, std::int64_t m,
                            std::int64_t k, const char* what) {
  const RefActs want(x, ldx, m, k);
  const std::vector<std::int8_t>& wq = want.q;
  const std::vector<float>& wd = want.d;
  const std::vector<std::int32_t>& ws = want.xs;
  for (const auto& [name, fn] : variants()) {
    for (const bool sums : {false, true}) {
      std::vector<std::int8_t> q(wq.size(), 99);
      std::vector<float> d(wd.size(), -7.0f);
      std::vector<std::int32_t> xs(ws.size(), -99);
      fn(x.data(), ldx, m, k, q.data(), d.data(), sums ? xs.data() : nullptr);
      EXPECT_EQ(q, wq) << name << " " << what;
      EXPECT_EQ(std::memcmp(d.data(), wd.data(), d.size() * sizeof(float)), 0)
          << name << " " << what;
      if (sums) {
        EXPECT_EQ(xs, ws) << name << " " << what;
      } else {
        EXPECT_EQ(xs, std::vector<std::int32_t>(ws.size(), -99)) << name << " " << what;
      }
    }
  }
}

TEST(QuantActs, RandomRowsEqualTheReference) {
  for (const float scale : {1e-3f, 1.0f, 37.5f, 3e4f}) {
    const std::int64_t m = 5, k = 224, ldx = 256;
    const std::vector<float> x = random_floats(m * ldx, 17, scale);
    expect_reference_bytes(x, ldx, m, k, "random");
  }
}

// Halves exactly: amax 127 gives d = 1, id = 1, so x = j + 0.5 rounds away from zero;
// amax 63.5 gives id = 2 and x = j / 2 + 0.25 lands on halves too. And values just below a
// half (0.49999997), which a "+ 0.5 then truncate" rounding would round up.
TEST(QuantActs, HalvesRoundAwayFromZero) {
  std::vector<float> x(4 * 32);
  for (int i = 0; i < 32; ++i) {
    x[static_cast<std::size_t>(i)] = i == 0 ? 127.0f : static_cast<float>(i % 16) - 7.5f;
    x[static_cast<std::size_t>(32 + i)] =
        i == 0 ? -63.5f : static_cast<float>(i - 16) * 0.5f + 0.25f;
    x[static_cast<std::size_t>(64 + i)] =
        i == 0 ? 127.0f : (i % 2 != 0 ? 1.0f : -1.0f) * std::nextafter(0.5f + (i % 7), 0.0f);
    x[static_cast<std::size_t>(96 + i)] = i == 0 ? 127.0f : (i % 2 != 0 ? 0.5f : -0.5f);
  }
  expect_reference_bytes(x, 32, 4, 32, "halves");
  std::vector<std::int8_t> q(32);
  std::vector<float> d(1);
  for (const auto& [name, fn] : variants()) {
    fn(x.data() + 96, 32, 1, 32, q.data(), d.data(), nullptr);
    EXPECT_EQ(q[1], 1) << name;
    EXPECT_EQ(q[2], -1) << name;
  }
}

// Blocks the vectors hand to the reference, beside ordinary ones in the same row: a NaN,
// +/-infinity, all zero, -0.0, a scale that rounds to binary16 zero (amax 1e-9), one that
// overflows binary16 (amax 1e7), subnormal inputs.
TEST(QuantActs, NonFiniteZeroAndExtremeBlocksEqualTheReference) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> fill = {std::nanf(""), inf, -inf, 0.0f, -0.0f, 1e-9f, 1e7f, 1e-40f};
  const std::int64_t k = 32 * static_cast<std::int64_t>(fill.size() + 1);
  std::vector<float> x = random_floats(k, 23);
  for (std::size_t b = 0; b < fill.size(); ++b) {
    for (int i = 0; i < 32; ++i) {
      float& v = x[(b + 1) * 32 + static_cast<std::size_t>(i)];
      if (fill[b] == 0.0f || std::isnan(fill[b])) {
        v = i == 5 ? fill[b] : (fill[b] == 0.0f ? fill[b] : v);
      } else if (std::isinf(fill[b])) {
        v = i == 31 ? fill[b] : v;
      } else {
        v = v * fill[b];
      }
    }
  }
  expect_reference_bytes(x, k, 1, k, "extreme");
  for (const auto& [name, fn] : variants()) {
    std::vector<std::int8_t> q(static_cast<std::size_t>(k));
    std::vector<float> d(static_cast<std::size_t>(k / 32));
    fn(x.data(), k, 1, k, q.data(), d.data(), nullptr);
    EXPECT_TRUE(std::isnan(d[1])) << name;  // the NaN block
    EXPECT_TRUE(std::isnan(d[2])) << name;  // the infinite one
    EXPECT_EQ(d[4], 0.0f) << name;          // all zero
    EXPECT_TRUE(std::isinf(d[7])) << name;  // binary16 overflow
  }
}

// QuantActs (the quantization the linears share): on 1 and 2 threads (rows split over the
// pool above 8 rows) and at the active ISA, q, d and xs are the reference's bytes and u is
// q + 128 as unsigned bytes.
TEST(QuantActs, SharedRowsOnAPoolEqualTheReference) {
  const std::int64_t k = 224, ldx = 240;
  for (const std::int64_t m : {1, 8, 9, 37}) {
    const std::vector<float> x = random_floats(m * ldx, 31 + static_cast<std::uint64_t>(m), 4.0f);
    const RefActs want(x, ldx, m, k);
    const std::vector<std::int8_t>& wq = want.q;
    const std::vector<float>& wd = want.d;
    const std::vector<std::int32_t>& ws = want.xs;
    for (const int threads : {1, 2}) {
      core::ThreadPool pool(threads);
      const QuantActs a(x.data(), ldx, m, k, /*sums=*/true, /*shifted=*/true, &pool);
      const cpu::QuantRows& got = a.rows();
      ASSERT_EQ(got.m, m);
      EXPECT_EQ(std::memcmp(got.q, wq.data(), wq.size()), 0) << m << " " << threads;
      EXPECT_EQ(std::memcmp(got.d, wd.data(), wd.size() * sizeof(float)), 0) << m;
      EXPECT_EQ(std::memcmp(got.xs, ws.data(), ws.size() * sizeof(std::int32_t)), 0) << m;
      for (std::size_t i = 0; i < wq.size(); ++i)
        ASSERT_EQ(static_cast<std::uint8_t>(got.u[i]), static_cast<std::uint8_t>(wq[i] + 128))
            << "m=" << m << " i=" << i;
      const QuantActs plain(x.data(), ldx, m, k, /*sums=*/false, /*shifted=*/false, &pool);
      EXPECT_EQ(plain.rows().u, nullptr);
      EXPECT_EQ(plain.rows().xs, nullptr);
      EXPECT_EQ(std::memcmp(plain.rows().q, wq.data(), wq.size()), 0);
    }
  }
}

// The AVX2 quantizer narrows the block scale with F16C (round to nearest even) and widens
// it back with F16C: the bits of f32_to_f16_rne and f16_to_f32 for every value that is not
// a NaN. Every 5th float bit pattern (both signs, zeros, subnormals, overflow to inf) and
// every half.
__attribute__((target("f16c"))) std::int64_t f16c_mismatches() {
  std::int64_t bad = 0;
  for (std::uint64_t i = 0; i <= 0xFFFFFFFFull; i += 5) {
    const auto u = static_cast<std::uint32_t>(i);
    float f;
    std::memcpy(&f, &u, sizeof f);
    if (f != f) continue;
    bad += _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT) != f32_to_f16_rne(f);
  }
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
    const float hw = _cvtsh_ss(static_cast<unsigned short>(h));
    const float sw = f16_to_f32(static_cast<std::uint16_t>(h));
    bad += !nan && std::memcmp(&hw, &sw, sizeof hw) != 0;
  }
  return bad;
}

TEST(QuantActs, F16cEqualsHalfRound) {
  if (!core::cpu_features().f16c) {
    // Without F16C the quantizer that uses it must never be chosen.
    EXPECT_FALSE(isa_supported(Isa::kAvx2));
    EXPECT_FALSE(isa_supported(Isa::kAvx512));
    return;
  }
  EXPECT_EQ(f16c_mismatches(), 0);
}

// The kept scratch: a second holder on the same thread gets a buffer of its own; released,
// the kept buffer serves the next holder; a need above kKeptBytes is never the kept one.
TEST(ThreadScratch, OneKeptBufferPerThreadOthersOwnTheirs) {
  std::uint8_t* kept = nullptr;
  {
    const cpu::ThreadScratch a(1000);
    const cpu::ThreadScratch b(1000);
    EXPECT_NE(a.data(), b.data());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
    kept = a.data();
  }
  {
    const cpu::ThreadScratch c(500);
    EXPECT_EQ(c.data(), kept);
    const cpu::ThreadScratch big(cpu::ThreadScratch::kKeptBytes + 1);
    EXPECT_NE(big.data(), kept);
  }
}

}  // namespace
}  // namespace detinfer::kernels
