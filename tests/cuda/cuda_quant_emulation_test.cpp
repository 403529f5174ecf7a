// The canonical quantized-linear kernels (src/kernels/cuda/quant_kernels.cuh) run on the CPU
// by tests/cuda/cuda_emulator.h, compared bit for bit with quantized spec v1's scalar
// reference (kernels/reference/quant_reference.h): the activation quantizer's bytes, the
// linear for every weight format the CPU runs, several M and N not a multiple of any
// tile, and the exact row read-back of a tied quantized embedding. Launch shapes are
// quant.cu's and a different one (the results must not depend on it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/cuda_emulator.h"  // first: defines the CUDA keywords for the kernels
#include "kernels/cuda/quant_kernels.cuh"
#include "kernels/quant.h"
#include "kernels/quant_test_util.h"
#include "kernels/reference/quant_blocks.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels::cuda {
namespace {

using testing::k_format;
using testing::random_floats;
using testing::random_q;
using testing::same_bits;

struct Launch {
  unsigned blocks, threads;  // 0 blocks: quant.cu's shape for the work
};
constexpr Launch kLaunches[] = {{0, 128}, {3, 32}};

dim3 grid_for(const Launch& l, std::int64_t work) {
  if (l.blocks != 0) return dim3(l.blocks);
  const std::int64_t b = (work + l.threads - 1) / l.threads;
  return dim3(static_cast<unsigned>(b < 1 ? 1 : (b < 65535 ? b : 65535)));
}

// The host decoding the CUDA backend does (model/cuda_backend.cpp make_quantized_linear).
struct Decoded {
  std::vector<std::int8_t> wq;
  std::vector<ref::BlockScales> ws;
};
Decoded decode(QuantFormat f, const std::vector<std::uint8_t>& w, std::int64_t n, std::int64_t k) {
  const std::int64_t nb = k / 32, row_bytes = quant_row_bytes(f, k);
  Decoded d{std::vector<std::int8_t>(n * k), std::vector<ref::BlockScales>(n * nb)};
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t b = 0; b < nb; ++b)
      d.ws[j * nb + b] = ref::decode_block(f, w.data() + j * row_bytes, b, &d.wq[j * k + b * 32]);
  return d;
}

struct Acts {
  std::vector<std::int8_t> q;
  std::vector<float> d;
  std::vector<std::int32_t> s;
};
Acts run_quantize_acts(const std::vector<float>& x, std::int64_t ldx, std::int64_t m,
                       std::int64_t k, const Launch& l) {
  Acts a{std::vector<std::int8_t>(m * k, 99), std::vector<float>(m * k / 32, -1.0f),
         std::vector<std::int32_t>(m * k / 16, -12345)};
  emu::launch(grid_for(l, m * k / 32), dim3(l.threads), 0, quantize_acts_kernel, x.data(), ldx, m,
              k, a.q.data(), a.d.data(), a.s.data());
  return a;
}

Acts ref_acts(const std::vector<float>& x, std::int64_t ldx, std::int64_t m, std::int64_t k) {
  Acts a{std::vector<std::int8_t>(m * k), std::vector<float>(m * k / 32),
         std::vector<std::int32_t>(m * k / 16)};
  for (std::int64_t r = 0; r < m; ++r) {
    ref::quantize_act_row(x.data() + r * ldx, k, &a.q[r * k], &a.d[r * k / 32]);
    ref::act_half_sums(&a.q[r * k], k, &a.s[r * k / 16]);
  }
  return a;
}

void expect_same_acts(const Acts& got, const Acts& want, const char* what) {
  EXPECT_EQ(std::memcmp(got.q.data(), want.q.data(), want.q.size()), 0) << what << ": q";
  EXPECT_TRUE(same_bits(got.d.data(), want.d.data(), static_cast<std::int64_t>(want.d.size())))
      << what << ": d";
  EXPECT_EQ(got.s, want.s) << what << ": half sums";
}

TEST(CudaQuantEmulation, QuantizeActsGivesTheReferenceBytes) {
  const std::int64_t k = 96, ldx = k + 5;  // 3 blocks a row
  for (const std::int64_t m : {1, 3, 16}) {
    std::vector<float> x = random_floats(m * ldx, 10 + static_cast<std::uint64_t>(m), 3.0f);
    for (const Launch& l : kLaunches) {
      expect_same_acts(run_quantize_acts(x, ldx, m, k, l), ref_acts(x, ldx, m, k), "random");
    }
  }
  // Special blocks, one per row block: exact halves (amax 127: d = 1, q = x rounded half
  // away from zero), a NaN, an infinity, all zeros, a scale that rounds to binary16 zero,
  // one that overflows binary16 (d = inf), and mixed signed zeros and subnormals.
  const std::int64_t m = 7;
  std::vector<float> x(m * ldx, 0.25f);
  auto block = [&](std::int64_t r) { return &x[r * ldx]; };
  for (int i = 0; i < 32; ++i) block(0)[i] = (i % 2 ? -1.0f : 1.0f) * (0.5f + i);
  block(0)[31] = 127.0f;
  block(1)[5] = std::numeric_limits<float>::quiet_NaN();
  block(2)[31] = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < 32; ++i) block(3)[i] = 0.0f;
  for (int i = 0; i < 32; ++i) block(4)[i] = 1e-12f * static_cast<float>(i - 16);
  block(5)[7] = 1e7f;
  for (int i = 0; i < 32; ++i) block(6)[i] = i % 3 == 0 ? -0.0f : 1e-40f * static_cast<float>(i);
  for (const Launch& l : kLaunches) {
    const Acts want = ref_acts(x, ldx, m, k);
    EXPECT_TRUE(std::isnan(want.d[1 * 3]) && std::isinf(want.d[5 * 3]));  // the cases occur
    expect_same_acts(run_quantize_acts(x, ldx, m, k, l), want, "special blocks");
  }
}

// For every format: y equals ref::quant_linear bit for bit, with and without a bias, for
// M = 1, 3, 16 and N = 37 / 13 (not a multiple of any tile or of the block size).
TEST(CudaQuantEmulation, QuantLinearEqualsReferenceForEveryFormat) {
  for (const QuantFormat f : kAllQuantFormats) {
    const std::int64_t n = k_format(f) ? 13 : 37, k = k_format(f) ? 512 : 96;
    const std::vector<std::uint8_t> w = random_q(f, n, k, 20 + static_cast<std::uint64_t>(f));
    const Decoded dec = decode(f, w, n, k);
    const bool has_min = quant_format_info(f).has_min;
    const std::vector<float> bias = random_floats(n, 30);
    for (const std::int64_t m : {1, 3, 16}) {
      const std::int64_t ldx = k + 3, ldy = n + 2;
      const std::vector<float> x = random_floats(m * ldx, 40 + static_cast<std::uint64_t>(m), 3.0f);
      for (const bool with_bias : {false, true}) {
        const float* b = with_bias ? bias.data() : nullptr;
        std::vector<float> want(m * ldy, -7.0f);
        ref::quant_linear(x.data(), ldx, m, w.data(), f, n, k, b, want.data(), ldy);
        for (const Launch& l : kLaunches) {
          const Acts a = run_quantize_acts(x, ldx, m, k, l);
          std::vector<float> got(m * ldy, -7.0f);
          emu::launch(grid_for(l, m * n), dim3(l.threads), 0, quant_linear_kernel, a.q.data(),
                      a.d.data(), a.s.data(), m, dec.wq.data(), dec.ws.data(), has_min, n, k, b,
                      got.data(), ldy);
          ASSERT_TRUE(same_bits(got.data(), want.data(), m * ldy))
              << to_string(f) << " m=" << m << " bias=" << with_bias << " threads=" << l.threads;
        }
      }
    }
  }
}

// A tied quantized embedding reads rows back exactly: ref::dequantize_block's values; an
// id outside the table gives a NaN row.
TEST(CudaQuantEmulation, QuantEmbeddingRowsAreTheDequantizedWeights) {
  for (const QuantFormat f : kAllQuantFormats) {
    const std::int64_t vocab = 11, dim = k_format(f) ? 256 : 64, ldo = dim + 1;
    const std::vector<std::uint8_t> w = random_q(f, vocab, dim, 50 + static_cast<std::uint64_t>(f));
    const Decoded dec = decode(f, w, vocab, dim);
    const std::vector<std::int32_t> ids = {3, 0, 10, 3, 11};
    std::vector<float> got(ids.size() * ldo, -7.0f);
    emu::launch(dim3(5), dim3(128), 0, quant_embedding_kernel, ids.data(),
                static_cast<std::int64_t>(ids.size()), dec.wq.data(), dec.ws.data(),
                quant_format_info(f).has_min, vocab, dim, got.data(), ldo);
    const std::int64_t row_bytes = quant_row_bytes(f, dim);
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const float* g = &got[r * ldo];
      if (ids[r] >= vocab) {
        for (std::int64_t i = 0; i < dim; ++i) ASSERT_TRUE(std::isnan(g[i])) << to_string(f);
        continue;
      }
      std::vector<float> want(dim);
      for (std::int64_t b = 0; b < dim / 32; ++b)
        ref::dequantize_block(f, w.data() + ids[r] * row_bytes, b, &want[b * 32]);
      ASSERT_TRUE(same_bits(g, want.data(), dim)) << to_string(f) << " row " << r;
      EXPECT_EQ(g[dim], -7.0f);  // ldo padding untouched
    }
  }
}

}  // namespace
}  // namespace detinfer::kernels::cuda
