// The nibble panel form (cpu/qlinear.h) of every format but q8_0: 4 bits per weight (q4_0,
// q4_1, q4_k, q2_k, q3_k), plus one bit plane (q5_0, q5_1, q5_k) or two (q6_k). It holds
// the int8 form's integers in 4 + planes bits per weight, and every kernel variant (scalar, AVX2,
// AVX-512 with and without VNNI) x M 1..64 x threads 1 / 2 / 3 / 8 over it gives the int8 form's
// bits and the reference's (ref::quant_linear).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_reference.h"
#include "linear_test_util.h"
#include "quant_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::k_format;
using testing::random_blocks;
using testing::random_floats;
using testing::same_bits;

constexpr QuantFormat kNibbleFormats[] = {
    QuantFormat::kQ4_0, QuantFormat::kQ4_1, QuantFormat::kQ4_K,
    QuantFormat::kQ2_K, QuantFormat::kQ3_K, QuantFormat::kQ5_0,
    QuantFormat::kQ5_1, QuantFormat::kQ5_K, QuantFormat::kQ6_K};

// Bit planes above the nibble: q5_* 1, q6_k 2, else 0.
int planes_of(QuantFormat f) {
  if (f == QuantFormat::kQ6_K) return 2;
  return f == QuantFormat::kQ5_0 || f == QuantFormat::kQ5_1 || f == QuantFormat::kQ5_K ? 1 : 0;
}

struct Shape {
  std::int64_t n, k;
};

// N odd (a partial last panel and column group); K multiples of 32 not of 64 or of 256
// not of 512, as the format allows.
std::vector<Shape> shapes(QuantFormat f) {
  return k_format(f) ? std::vector<Shape>{{77, 256}, {131, 768}}
                     : std::vector<Shape>{{77, 32}, {131, 160}, {67, 288}};
}

// Random blocks: every nibble value, sub-scale and min pattern occurs.
std::vector<std::uint8_t> weights(QuantFormat f, Shape s, std::uint64_t stream) {
  return random_blocks(f, s.n * s.k / quant_format_info(f).block_elems, stream);
}

// Activations of m rows quantized as quant_run does: int8, block scales, half sums.
struct Acts {
  std::vector<std::int8_t> q, u;  // u: q + 128 as unsigned bytes (the VNNI int8 form's)
  std::vector<float> d;
  std::vector<std::int32_t> xs;
  Acts(const std::vector<float>& x, std::int64_t m, std::int64_t k)
      : q(static_cast<std::size_t>(m * k)),
        d(static_cast<std::size_t>(m * k / 32)),
        xs(static_cast<std::size_t>(m * k / 16)) {
    for (std::int64_t r = 0; r < m; ++r) {
      ref::quantize_act_row(x.data() + r * k, k, q.data() + r * k, d.data() + r * k / 32);
      ref::act_half_sums(q.data() + r * k, k, xs.data() + r * k / 16);
    }
    for (const std::int8_t v : q) u.push_back(static_cast<std::int8_t>(v + 128));
  }
  cpu::QuantRows rows(std::int64_t m) const { return {q.data(), u.data(), d.data(), xs.data(), m}; }
};

std::vector<std::pair<const char*, cpu::QLinearFn>> kernel_variants() {
  std::vector<std::pair<const char*, cpu::QLinearFn>> fns = {{"scalar", cpu::qlinear_scalar()}};
  if (isa_supported(Isa::kAvx2)) fns.emplace_back("avx2", cpu::qlinear_avx2());
  if (isa_supported(Isa::kAvx512)) fns.emplace_back("avx512", cpu::qlinear_avx512(false));
  if (isa_supported(Isa::kAvx512) && cpu::cpu_has_avx512_vnni())
    fns.emplace_back("avx512-vnni", cpu::qlinear_avx512(true));
  return fns;
}

class NibbleFormats : public ::testing::TestWithParam<QuantFormat> {};

TEST_P(NibbleFormats, HoldTheInt8PanelsIntegersInFewerBytes) {
  const QuantFormat f = GetParam();
  for (const Shape s : shapes(f)) {
    const std::vector<std::uint8_t> w = weights(f, s, 11);
    const cpu::QuantPanels nib = cpu::pack_quant_panels(w.data(), f, s.n, s.k, nullptr);
    const cpu::QuantPanels i8 = cpu::pack_quant_panels(w.data(), f, s.n, s.k, nullptr, nullptr,
                                                       /*nibble=*/false);
    const int planes = planes_of(f);
    ASSERT_TRUE(nib.view.nibble);
    ASSERT_EQ(nib.view.planes, planes);
    ASSERT_FALSE(i8.view.nibble);
    EXPECT_EQ(8 * nib.view.qs_bytes(), (4 + planes) * i8.view.qs_bytes());
    EXPECT_EQ(nib.d, i8.d);
    EXPECT_EQ(nib.sm, i8.sm);
    EXPECT_EQ(nib.dm, i8.dm);
    EXPECT_TRUE(nib.wsum.empty() && nib.wsum_hi.empty());
    for (std::int64_t p = 0; p < nib.view.panels; ++p)
      for (std::int64_t b = 0; b < nib.view.nb; ++b)
        for (std::int64_t l = 0; l < cpu::kPanel; ++l)
          for (std::int64_t i = 0; i < 32; ++i) {
            if (p * cpu::kPanel + l >= s.n) {  // columns past n: zero bits
              ASSERT_EQ(cpu::packed_weight(nib.view, p, b, l, i), -nib.view.offset) << p << l;
              continue;
            }
            ASSERT_EQ(cpu::packed_weight(nib.view, p, b, l, i),
                      cpu::packed_weight(i8.view, p, b, l, i))
                << "p=" << p << " b=" << b << " l=" << l << " i=" << i;
          }
    const double ratio = static_cast<double>(nib.bytes()) / static_cast<double>(i8.bytes());
    EXPECT_LT(ratio, (4 + planes) / 8.0 + 0.1) << to_string(f);
    std::printf("[ bytes ] %s n=%lld k=%lld: nibble %zu / int8 %zu = %.3f\n", to_string(f),
                static_cast<long long>(s.n), static_cast<long long>(s.k), nib.bytes(), i8.bytes(),
                ratio);
  }
}

// The scale cells hold what a block needs and no more: int16 sub-scales (two int8), a
// second int16 for q2_k's two mins, and a K format's d and dm once per super-block (8
// blocks), as the file does. Fails when d / dm go back to one cell per block or sm to an
// int32 (a q4_k block of a 16-column group read 384 bytes instead of 296).
TEST_P(NibbleFormats, ScaleCellsPerBlockAndSuperBlock) {
  const QuantFormat f = GetParam();
  const QuantFormatInfo info = quant_format_info(f);
  const bool split = f == QuantFormat::kQ2_K || f == QuantFormat::kQ3_K || f == QuantFormat::kQ6_K;
  const bool ext = info.sub_scaled || info.has_min;
  const std::int64_t dblocks = info.block_elems / 32;
  const auto bits = [](float v) {  // random scales may be NaN: compare bit patterns
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  };
  for (const Shape s : shapes(f)) {
    const std::vector<std::uint8_t> w = weights(f, s, 13);
    const cpu::QuantPanels nib = cpu::pack_quant_panels(w.data(), f, s.n, s.k, nullptr);
    const std::int64_t cells = nib.view.panels * cpu::kPanel * nib.view.nb;
    EXPECT_EQ(static_cast<std::int64_t>(nib.d.size()), cells / dblocks) << to_string(f);
    EXPECT_EQ(static_cast<std::int64_t>(nib.dm.size()), info.has_min ? cells / dblocks : 0);
    EXPECT_EQ(static_cast<std::int64_t>(nib.sm.size()), ext ? cells : 0);
    EXPECT_EQ(static_cast<std::int64_t>(nib.mm.size()), split && info.has_min ? cells : 0);
    EXPECT_EQ(nib.view.dshift, info.block_elems == 256 ? 3 : 0);
    // A K format's blocks read their super-block's scales: every block's d and dm are the
    // reference's (ref::decode_block) for each column.
    const std::int64_t row_bytes = quant_row_bytes(f, s.k);
    for (std::int64_t j = 0; j < s.n; ++j)
      for (std::int64_t b = 0; b < nib.view.nb; ++b) {
        std::int8_t q[32];
        const ref::BlockScales bs = ref::decode_block(f, w.data() + j * row_bytes, b, q);
        const std::int64_t p = j / cpu::kPanel, l = j % cpu::kPanel;
        const std::int64_t at = cpu::qd_index(nib.view.nb, p, b, l);
        const std::int64_t atd = cpu::qdm_index(nib.view, p, b, l);
        ASSERT_EQ(bits(f16_to_f32(nib.d[static_cast<std::size_t>(atd)])), bits(bs.d))
            << j << " " << b;
        for (int h = 0; h < 2; ++h) {
          ASSERT_EQ(cpu::packed_sub_scale(nib.view, at, h), bs.s[h]) << j << " " << b;
          ASSERT_EQ(cpu::packed_sub_min(nib.view, at, h), bs.m[h]) << j << " " << b;
        }
        if (info.has_min) {
          ASSERT_EQ(bits(f16_to_f32(nib.dm[static_cast<std::size_t>(atd)])), bits(bs.dm))
              << j << " " << b;
        }
      }
  }
}

// Each kernel variant called directly on both forms, M = 1..64.
TEST_P(NibbleFormats, EveryKernelVariantEqualsTheInt8PanelsAndTheReference) {
  const QuantFormat f = GetParam();
  const auto fns = kernel_variants();
  for (const Shape s : shapes(f)) {
    const std::vector<std::uint8_t> w = weights(f, s, 21);
    const cpu::QuantPanels nib = cpu::pack_quant_panels(w.data(), f, s.n, s.k, nullptr);
    const cpu::QuantPanels i8 = cpu::pack_quant_panels(w.data(), f, s.n, s.k, nullptr, nullptr,
                                                       /*nibble=*/false);
    for (std::int64_t m = 1; m <= 64; ++m) {
      const std::vector<float> x =
          random_floats(m * s.k, 100 + static_cast<std::uint64_t>(m), 3.0f);
      std::vector<float> want(static_cast<std::size_t>(m * s.n));
      ref::quant_linear(x.data(), s.k, m, w.data(), f, s.n, s.k, nullptr, want.data(), s.n);
      const Acts a(x, m, s.k);
      for (const auto& [name, fn] : fns) {
        for (const cpu::QuantPanels* hp : {&nib, &i8}) {
          std::vector<float> got(want.size(), -1.0f);
          fn(hp->view, a.rows(m), got.data(), s.n, 0, hp->view.panels);
          ASSERT_TRUE(same_bits(got.data(), want.data(), m * s.n))
              << name << (hp == &nib ? " nibble" : " int8") << " n=" << s.n << " k=" << s.k
              << " m=" << m;
        }
      }
    }
  }
  if (!isa_supported(Isa::kAvx512) || !cpu::cpu_has_avx512_vnni())
    std::printf("[ note ] variants checked: %zu (this CPU lacks AVX-512 or VNNI)\n", fns.size());
}

// PackedLinear (nibble form, decoded on a pool) run on every ISA and thread count.
TEST_P(NibbleFormats, EveryIsaThreadCountAndMEqualsTheReference) {
  const QuantFormat f = GetParam();
  testing::IsaGuard guard;
  for (const Shape s : shapes(f)) {
    const std::vector<std::uint8_t> w = weights(f, s, 31);
    const std::vector<float> bias = random_floats(s.n, 32);
    const PackedLinear p =
        PackedLinear::pack_quantized(w.data(), f, s.n, s.k, bias.data(), testing::pool_for(3));
    for (std::int64_t m = 1; m <= 64; ++m) {
      const std::vector<float> x =
          random_floats(m * s.k, 200 + static_cast<std::uint64_t>(m), 3.0f);
      std::vector<float> want(static_cast<std::size_t>(m * s.n));
      ref::quant_linear(x.data(), s.k, m, w.data(), f, s.n, s.k, bias.data(), want.data(), s.n);
      for (const Isa isa : available_isas()) {
        set_isa(isa);
        for (const int t : {1, 2, 3, 8}) {
          std::vector<float> got(want.size(), -1.0f);
          p.run(x.data(), s.k, m, got.data(), s.n, testing::pool_for(t));
          ASSERT_TRUE(same_bits(got.data(), want.data(), m * s.n))
              << to_string(isa) << " n=" << s.n << " k=" << s.k << " m=" << m << " t=" << t;
        }
      }
    }
  }
}

// Every quant at its largest (all bits set: u = 2^(4 + planes) - 1, the nibble form's
// widest) against activations all -127 or all +127: every product of a row's sums has one
// sign, so a kernel that sums more products in a narrow integer than fits (the AVX2 int16
// sums) gives other bits than the reference.
TEST_P(NibbleFormats, TheLargestIntegersSumExactly) {
  const QuantFormat f = GetParam();
  const auto fns = kernel_variants();
  const Shape s = k_format(f) ? Shape{77, 512} : Shape{77, 256};
  std::vector<std::uint8_t> w = weights(f, s, 41);
  const std::int64_t bytes = quant_format_info(f).block_bytes;
  const auto [first, last] = testing::quant_byte_range(f);
  for (std::size_t b = 0; b < w.size(); b += static_cast<std::size_t>(bytes))
    std::memset(w.data() + b + first, 0xFF, static_cast<std::size_t>(last - first));
  const cpu::QuantPanels nib = cpu::pack_quant_panels(w.data(), f, s.n, s.k, nullptr);
  for (const float sign : {-1.0f, 1.0f}) {
    for (std::int64_t m : {1, 2, 5, 16}) {
      const std::vector<float> x(static_cast<std::size_t>(m * s.k), sign * 0.75f);
      const Acts a(x, m, s.k);
      ASSERT_EQ(a.q[0], sign < 0 ? -127 : 127);
      std::vector<float> want(static_cast<std::size_t>(m * s.n));
      ref::quant_linear(x.data(), s.k, m, w.data(), f, s.n, s.k, nullptr, want.data(), s.n);
      for (const auto& [name, fn] : fns) {
        std::vector<float> got(want.size(), -1.0f);
        fn(nib.view, a.rows(m), got.data(), s.n, 0, nib.view.panels);
        ASSERT_TRUE(same_bits(got.data(), want.data(), m * s.n))
            << name << " x=" << sign << " m=" << m;
      }
    }
  }
}

// Every format but q8_0 takes the nibble form, with planes_of(f) planes.
TEST(NibbleForm, EveryFormatButQ8_0UsesIt) {
  for (const QuantFormat f : kAllQuantFormats) {
    const std::int64_t k = k_format(f) ? 256 : 32;
    const std::vector<std::uint8_t> w = random_blocks(f, k / quant_format_info(f).block_elems, 3);
    const cpu::QuantPanels hp = cpu::pack_quant_panels(w.data(), f, 1, k, nullptr);
    EXPECT_EQ(hp.view.nibble, f != QuantFormat::kQ8_0) << to_string(f);
    EXPECT_EQ(hp.view.planes, planes_of(f)) << to_string(f);
    EXPECT_EQ(cpu::nibble_form(f).offset >= 0, f != QuantFormat::kQ8_0) << to_string(f);
  }
}

INSTANTIATE_TEST_SUITE_P(Nibble, NibbleFormats, ::testing::ValuesIn(kNibbleFormats),
                         [](const ::testing::TestParamInfo<QuantFormat>& i) {
                           return std::string(to_string(i.param));
                         });

}  // namespace
}  // namespace detinfer::kernels
