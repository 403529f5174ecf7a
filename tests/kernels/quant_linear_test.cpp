// The quantized linear (quantized spec v1): every ISA (AVX-512 with and without VNNI) x
// M x threads x entry point equals the scalar reference (ref::quant_linear) bit for bit;
// block decoding and the quantizer; accuracy against a float64 dequantize-then-dot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "detinfer/error.h"
#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_blocks.h"
#include "kernels/reference/quant_reference.h"
#include "linear_test_util.h"
#include "quant_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::IsaGuard;
using testing::k_format;
using testing::pool_for;
using testing::random_floats;
using testing::random_q;
using testing::same_bits;

class QuantFormats : public ::testing::TestWithParam<QuantFormat> {};

struct Shape {
  std::int64_t n, k;
};

TEST_P(QuantFormats, EveryIsaMThreadsEqualsReference) {
  const QuantFormat f = GetParam();
  IsaGuard guard;
  const std::vector<std::int64_t> ms = {1,  2,  3,  4,  5,  6,  7,  8,  9, 10,
                                        11, 12, 13, 14, 15, 16, 17, 33, 64};
  // K multiples of 32 but not of 64 / 256 (of 256 but not 512 for the K formats); N not a
  // multiple of 64 (nor of 8).
  const std::vector<Shape> shapes =
      k_format(f) ? std::vector<Shape>{{200, 256}, {64, 768}, {77, 512}}
                  : std::vector<Shape>{{200, 96}, {64, 32}, {131, 160}, {77, 288}};
  for (const Shape s : shapes) {
    const std::vector<std::uint8_t> w = random_q(f, s.n, s.k, 1);
    const std::vector<float> bias = random_floats(s.n, 2);
    for (const bool with_bias : {false, true}) {
      const float* b = with_bias ? bias.data() : nullptr;
      const PackedLinear p = PackedLinear::pack_quantized(w.data(), f, s.n, s.k, b);
      for (const std::int64_t m : ms) {
        const std::vector<float> x =
            random_floats(m * s.k, 3 + static_cast<std::uint64_t>(m), 3.0f);
        std::vector<float> want(static_cast<std::size_t>(m * s.n));
        ref::quant_linear(x.data(), s.k, m, w.data(), f, s.n, s.k, b, want.data(), s.n);
        for (const Isa isa : available_isas()) {
          set_isa(isa);
          for (const int t : {1, 2}) {
            std::vector<float> got(want.size(), -1.0f);
            p.run(x.data(), s.k, m, got.data(), s.n, pool_for(t));
            ASSERT_TRUE(same_bits(got.data(), want.data(), m * s.n))
                << to_string(isa) << " n=" << s.n << " k=" << s.k << " m=" << m << " t=" << t;
          }
          std::vector<float> got(want.size(), -1.0f);
          p.run_panels(x.data(), s.k, m, got.data(), s.n, 0, 1);
          p.run_panels(x.data(), s.k, m, got.data(), s.n, 1, p.panels());
          ASSERT_TRUE(same_bits(got.data(), want.data(), m * s.n)) << to_string(isa) << " panels";
        }
      }
    }
  }
}

TEST_P(QuantFormats, EveryKernelVariantWithAndWithoutVnniEqualsReference) {
  const QuantFormat f = GetParam();
  // Each kernel variant called directly (the dispatcher only ever picks one per CPU).
  const std::int64_t n = 150, k = k_format(f) ? 512 : 224;
  const std::vector<std::uint8_t> w = random_q(f, n, k, 5);
  const cpu::QuantPanels hp = cpu::pack_quant_panels(w.data(), f, n, k, nullptr);
  std::vector<std::pair<const char*, cpu::QLinearFn>> fns = {{"scalar", cpu::qlinear_scalar()}};
  if (isa_supported(Isa::kAvx2)) fns.emplace_back("avx2", cpu::qlinear_avx2());
  if (isa_supported(Isa::kAvx512)) fns.emplace_back("avx512", cpu::qlinear_avx512(false));
  if (isa_supported(Isa::kAvx512) && cpu::cpu_has_avx512_vnni())
    fns.emplace_back("avx512-vnni", cpu::qlinear_avx512(true));
  for (const std::int64_t m : {1, 2, 3, 4, 5, 16}) {  // 1-2: four-stream tiles
    const std::vector<float> x = random_floats(m * k, 6, 2.0f);
    std::vector<float> want(static_cast<std::size_t>(m * n));
    ref::quant_linear(x.data(), k, m, w.data(), f, n, k, nullptr, want.data(), n);
    std::vector<std::int8_t> xq(static_cast<std::size_t>(m * k));
    std::vector<float> xd(static_cast<std::size_t>(m * k / 32));
    std::vector<std::int32_t> xs(static_cast<std::size_t>(m * k / 16));
    for (std::int64_t r = 0; r < m; ++r) {
      ref::quantize_act_row(x.data() + r * k, k, xq.data() + r * k, xd.data() + r * k / 32);
      ref::act_half_sums(xq.data() + r * k, k, xs.data() + r * k / 16);
    }
    std::vector<std::int8_t> xu;  // q + 128 as unsigned bytes (the VNNI int8 form's)
    for (const std::int8_t v : xq) xu.push_back(static_cast<std::int8_t>(v + 128));
    const cpu::QuantRows rows{xq.data(), xu.data(), xd.data(), xs.data(), m};
    for (const auto& [name, fn] : fns) {
      std::vector<float> got(want.size(), -1.0f);
      fn(hp.view, rows, got.data(), n, 0, hp.view.panels);
      ASSERT_TRUE(same_bits(got.data(), want.data(), m * n)) << name << " m=" << m;
    }
  }
  // The variants this CPU lacks cannot run here; the ones it has were all checked above.
  if (!isa_supported(Isa::kAvx512) || !cpu::cpu_has_avx512_vnni())
    std::printf("[ note ] variants checked: %zu (this CPU lacks AVX-512 or VNNI)\n", fns.size());
}

// Long rows with several row tiles: the kernels walk the blocks in runs (every row tile
// over a run while its weights are in L1, the sums waiting in y between runs); the runs'
// sizes differ per form, so K spans two or more runs with a partial last one for every
// format. Each variant, the dispatcher on 1 and 2 threads, with a bias, equals the
// reference.
TEST_P(QuantFormats, RowsInBlockRunsEqualReference) {
  const QuantFormat f = GetParam();
  IsaGuard guard;
  const std::int64_t n = 150, k = k_format(f) ? 256 * 11 : 32 * 75;
  const std::vector<std::uint8_t> w = random_q(f, n, k, 11);
  const std::vector<float> bias = random_floats(n, 12);
  const PackedLinear p = PackedLinear::pack_quantized(w.data(), f, n, k, bias.data());
  for (const std::int64_t m : {3, 5, 8, 16, 33}) {
    const std::vector<float> x = random_floats(m * k, 13 + static_cast<std::uint64_t>(m), 2.0f);
    std::vector<float> want(static_cast<std::size_t>(m * n));
    ref::quant_linear(x.data(), k, m, w.data(), f, n, k, bias.data(), want.data(), n);
    for (const Isa isa : available_isas()) {
      set_isa(isa);
      for (const int t : {1, 2}) {
        std::vector<float> got(want.size(), -1.0f);
        p.run(x.data(), k, m, got.data(), n, pool_for(t));
        ASSERT_TRUE(same_bits(got.data(), want.data(), m * n))
            << to_string(isa) << " m=" << m << " t=" << t;
      }
    }
  }
}

// Decoding at load on a thread pool (PackedLinear::pack_quantized's pool): every array of
// the panels equals the serial decode's, whatever the thread count (n not a multiple of
// the panel width, more panels than threads).
TEST_P(QuantFormats, PanelsDecodedOnAPoolEqualTheSerialOnes) {
  const QuantFormat f = GetParam();
  const std::int64_t n = 300, k = k_format(f) ? 512 : 224;
  const std::vector<std::uint8_t> w = random_q(f, n, k, 17);
  const cpu::QuantPanels serial = cpu::pack_quant_panels(w.data(), f, n, k, nullptr);
  for (const int threads : {2, 3}) {
    core::ThreadPool pool(threads);
    const cpu::QuantPanels p = cpu::pack_quant_panels(w.data(), f, n, k, nullptr, &pool);
    const auto bytes = static_cast<std::size_t>(serial.view.qs_bytes());
    EXPECT_TRUE(std::equal(p.view.qs, p.view.qs + bytes, serial.view.qs)) << threads;
    EXPECT_EQ(p.d, serial.d) << threads;
    EXPECT_EQ(p.wsum, serial.wsum) << threads;
    EXPECT_EQ(p.wsum_hi, serial.wsum_hi) << threads;
    EXPECT_EQ(p.sm, serial.sm) << threads;
    EXPECT_EQ(p.dm, serial.dm) << threads;
  }
}

TEST_P(QuantFormats, WidenRowIsTheExactDequantizedRow) {
  const QuantFormat f = GetParam();
  const std::int64_t n = 70, k = k_format(f) ? 256 : 96;
  const std::vector<std::uint8_t> w = random_q(f, n, k, 7);
  const PackedLinear p = PackedLinear::pack_quantized(w.data(), f, n, k);
  EXPECT_TRUE(p.quantized());
  std::vector<float> got(k), want(k);
  for (std::int64_t j = 0; j < n; ++j) {
    p.widen_row(j, got.data());
    const std::int64_t rb = quant_row_bytes(f, k);
    dequantize_row(f, w.data() + j * rb, k, want.data());
    ASSERT_TRUE(same_bits(got.data(), want.data(), k)) << "row " << j;
    if (f != QuantFormat::kQ8_0) continue;
    // Block layout: fp16 d then 32 int8.
    const float d = f16_to_f32(static_cast<std::uint16_t>(w[j * 102] | (w[j * 102 + 1] << 8)));
    EXPECT_EQ(want[5], d * static_cast<float>(static_cast<std::int8_t>(w[j * 102 + 2 + 5])));
  }
}

TEST(QuantLinear, QuantizerFollowsTheSpec) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) * 0.5f;  // amax 8 at i = 0
  std::uint8_t blk[34];
  quantize_rows(QuantFormat::kQ8_0, x, 1, 32, blk);
  EXPECT_EQ(blk[0] | (blk[1] << 8), f32_to_f16_rne(8.0f / 127.0f));
  EXPECT_EQ(static_cast<std::int8_t>(blk[2]), -127);
  // x = 0.5 * id = 0.5 * 127 / 8 = 7.9375 -> 8; round half away: check a .5 case directly.
  EXPECT_EQ(static_cast<std::int8_t>(blk[2 + 17]), 8);
  float h[32] = {};
  h[0] = 127.0f;  // d = 1, id = 1
  h[1] = 2.5f;
  h[2] = -2.5f;
  std::int8_t q[32];
  ref::quantize_q8_block(h, q);
  EXPECT_EQ(q[1], 3);
  EXPECT_EQ(q[2], -3);
  // A non-finite activation block poisons its block (NaN scale, q = 0); weights refuse it.
  h[3] = NAN;
  EXPECT_EQ(ref::quantize_q8_block(h, q), 0x7E00);
  EXPECT_THROW(quantize_rows(QuantFormat::kQ8_0, h, 1, 32, blk), Error);
  EXPECT_THROW(quant_row_bytes(QuantFormat::kQ8_0, 48), Error);
  EXPECT_THROW(PackedLinear::pack_quantized(blk, QuantFormat::kQ8_0, 1, 40), Error);
  // Q4_0 / Q5_0: max = -4 (largest |x|), d = -4 / -8 = 0.5 (q4_0) or 0.25 (q5_0);
  // x = 1 -> trunc(1 / d + 8.5) = 10 (nibble) -> value (10 - 8) * 0.5 = 1.
  float v[32];
  for (int i = 0; i < 32; ++i) v[i] = 1.0f;
  v[0] = -4.0f;
  v[17] = 3.9f;  // -> trunc(7.8 + 8.5) = 16 -> clamped to 15 (q4_0)
  std::uint8_t b4[18];
  quantize_rows(QuantFormat::kQ4_0, v, 1, 32, b4);
  EXPECT_EQ(b4[0] | (b4[1] << 8), f32_to_f16_rne(0.5f));
  EXPECT_EQ(b4[2], 0x00 | (10 << 4));  // element 0: nibble 0 (-8); element 16: 10
  EXPECT_EQ(b4[3] >> 4, 15);           // element 17 clamped
  float dq[32];
  dequantize_row(QuantFormat::kQ4_0, b4, 32, dq);
  EXPECT_EQ(dq[0], -4.0f);
  EXPECT_EQ(dq[1], 1.0f);
  EXPECT_EQ(dq[17], 3.5f);
  std::uint8_t b5[22];
  quantize_rows(QuantFormat::kQ5_0, v, 1, 32, b5);
  EXPECT_EQ(b5[0] | (b5[1] << 8), f32_to_f16_rne(0.25f));
  dequantize_row(QuantFormat::kQ5_0, b5, 32, dq);
  EXPECT_EQ(dq[0], -4.0f);   // u = 0: qh bit 0 clear, nibble 0
  EXPECT_EQ(dq[1], 1.0f);    // u = trunc(4 + 16.5) = 20: qh bit set, nibble 4
  EXPECT_EQ(dq[17], 3.75f);  // u = trunc(15.6 + 16.5) = 32 -> 31
  EXPECT_EQ(b5[2] & 1, 0);
  EXPECT_EQ((b5[2] >> 1) & 1, 1);
  EXPECT_EQ(b5[6 + 1] & 0x0F, 4);
  QuantFormat f;
  EXPECT_TRUE(parse_quant_format("q4_0", &f));
  EXPECT_EQ(f, QuantFormat::kQ4_0);
  EXPECT_TRUE(parse_quant_format("q5_0", &f));
  EXPECT_TRUE(parse_quant_format("q8_0", &f));
  EXPECT_FALSE(parse_quant_format("q9_0", &f));
}

// Accuracy: the quantized result against float64 sum(w_deq * x) over the exact
// dequantized weights. Activation quantization error per element is at most dx/2 (plus
// the binary16 rounding of d, relative 2^-11), so |err| <= sum_b (0.5 * dx_b + amax_b *
// 2^-11) * sum_i |w_i| of block b, plus float rounding; the test asserts that bound (with a
// 1e-5 relative slack for binary32 folds) and reports the largest ratio seen.
TEST_P(QuantFormats, AccuracyWithinTheActivationQuantizationBound) {
  const QuantFormat f = GetParam();
  const std::int64_t n = 96, k = k_format(f) ? 1024 : 896, m = 4;
  const std::vector<std::uint8_t> w = random_q(f, n, k, 11);
  const std::vector<float> x = random_floats(m * k, 12, 4.0f);
  const PackedLinear p = PackedLinear::pack_quantized(w.data(), f, n, k);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  p.run(x.data(), k, m, y.data(), n, nullptr);
  std::vector<float> wr(k);
  double worst = 0;
  const std::int64_t rb = quant_row_bytes(f, k);
  for (std::int64_t j = 0; j < n; ++j) {
    p.widen_row(j, wr.data());
    for (std::int64_t r = 0; r < m; ++r) {
      double exact = 0, bound = 0, mag = 0;
      for (std::int64_t b = 0; b < k / 32; ++b) {
        double amax = 0, wsum = 0;
        std::int8_t q[32];
        const ref::BlockScales bs = ref::decode_block(f, w.data() + j * rb, b, q);
        for (std::int64_t i = b * 32; i < b * 32 + 32; ++i) {
          // The weight as exact parts: the scale term and the min term (with a min the
          // binary32 block value is the difference of two rounded products).
          const double t = std::fabs(static_cast<double>(bs.d) * bs.s[(i % 32) / 16] * q[i % 32]) +
                           std::fabs(static_cast<double>(bs.dm) * bs.m[(i % 32) / 16]);
          amax = std::max(amax, std::fabs(static_cast<double>(x[r * k + i])));
          wsum += std::fabs(static_cast<double>(wr[i]));
          exact += static_cast<double>(wr[i]) * x[r * k + i];
          mag += t * std::fabs(static_cast<double>(x[r * k + i]));
        }
        bound +=
            (0.5 * amax / 127.0 * (1 + std::ldexp(1.0, -11)) + amax * std::ldexp(1.0, -11)) * wsum;
      }
      bound += 1e-5 * mag;
      const double err = std::fabs(y[r * n + j] - exact);
      ASSERT_LE(err, bound) << "j=" << j << " r=" << r;
      worst = std::max(worst, err / bound);
    }
  }
  std::printf("[ measured ] worst |err| / bound = %.4f\n", worst);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, QuantFormats, ::testing::ValuesIn(kAllQuantFormats),
                         [](const ::testing::TestParamInfo<QuantFormat>& i) {
                           return std::string(to_string(i.param));
                         });

}  // namespace
}  // namespace detinfer::kernels
