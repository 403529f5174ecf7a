// The CUDA kernels' own code, run on the CPU by tests/cuda/cuda_emulator.h (one fiber per
// CUDA thread, real barriers and warp shuffles), compared bit for bit with the CPU
// reference. Runs without a GPU: it checks every index computation, chunk boundary,
// fold order, tie rule and synchronization pattern of the canonical kernels, the split
// attention and the sampling draw, and that their results do not depend on the number of
// threads per block. It cannot check what only hardware does (see cuda_emulator.h).
// Launch shapes are the launchers' (canonical.cu, attention.cu, fast.cu) and, where the
// kernel allows it, a different one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cuda/cuda_emulator.h"  // first: defines the CUDA keywords for the kernels
#include "cuda/cuda_test_util.h"
#include "cuda/emulated_attention.h"
#include "decode/logits_processor.h"
#include "decode/sampler.h"
#include "detinfer/philox.h"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/canonical_kernels.cuh"
#include "kernels/cuda/fast_kernels.cuh"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cuda {
namespace {

using test::attention_threads;
using test::Cache;
using test::make_cache;
using test::random_f16;
using test::random_floats;
using test::random_index;
using test::run_attention;
using test::same_bits;
using test::to_bf16;

std::size_t chunk_bytes(std::int64_t n) { return static_cast<std::size_t>((n + 63) / 64) * 4; }

TEST(CudaEmulation, LinearEqualsReferenceForEveryDtypeAndLoadPath) {
  struct Shape {
    std::int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 5, 1}, {3, 9, 65}, {9, 5, 64}, {2, 4, 2049}};
  std::uint64_t seed = 1;
  for (const core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    for (const Shape& s : shapes) {
      for (const int offset : {0, 1}) {  // 1: weights not 16-byte aligned -> scalar loads
        ++seed;
        const std::int64_t ldx = s.k + 2, ldy = s.n + 1;
        const std::vector<float> x = random_floats(s.m * ldx, seed);
        const std::vector<float> bias = random_floats(s.n, seed + 100);
        const float* b = seed % 2 ? bias.data() : nullptr;
        std::vector<float> wf(s.n * s.k);
        std::vector<float> w32;
        std::vector<std::uint16_t> w16;
        const void* w = nullptr;
        if (dtype == core::DType::kF32) {
          w32 = random_floats(wf.size() + 1, seed + 200);
          for (std::size_t i = 0; i < wf.size(); ++i) wf[i] = w32[i + offset];
          w = w32.data() + offset;
        } else {
          w16 = dtype == core::DType::kBF16 ? to_bf16(random_floats(wf.size() + 1, seed + 200))
                                            : random_f16(wf.size() + 1, seed + 200);
          for (std::size_t i = 0; i < wf.size(); ++i)
            wf[i] = dtype == core::DType::kBF16 ? bf16_to_f32(w16[i + offset])
                                                : f16_to_f32(w16[i + offset]);
          w = w16.data() + offset;
        }
        std::vector<float> want(s.m * ldy, -7.0f);
        ref::linear(x.data(), ldx, s.m, wf.data(), s.n, s.k, b, want.data(), ldy);
        std::vector<float> got(s.m * ldy, -7.0f);
        const int vec_elems = dtype == core::DType::kF32 ? 4 : 8;
        const bool vec = s.k % vec_elems == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
        const auto blocks = static_cast<unsigned>((s.n + kLinWarps - 1) / kLinWarps);
        const dim3 grid(blocks);
        const dim3 block(kLinWarps * 32);
        if (dtype == core::DType::kF32) {
          emu::launch(grid, block, 0, linear_kernel<core::DType::kF32>, x.data(), ldx, s.m, w, s.n,
                      s.k, b, got.data(), ldy, vec);
        } else if (dtype == core::DType::kBF16) {
          emu::launch(grid, block, 0, linear_kernel<core::DType::kBF16>, x.data(), ldx, s.m, w, s.n,
                      s.k, b, got.data(), ldy, vec);
        } else {
          emu::launch(grid, block, 0, linear_kernel<core::DType::kF16>, x.data(), ldx, s.m, w, s.n,
                      s.k, b, got.data(), ldy, vec);
        }
        ASSERT_TRUE(same_bits(got, want))
            << to_string(dtype) << " m=" << s.m << " n=" << s.n << " k=" << s.k << " vec=" << vec;
      }
    }
  }
}

TEST(CudaEmulation, RowKernelsEqualReferenceForAnyBlockSize) {
  for (const std::int64_t n : {1, 65, 3000}) {
    const std::int64_t rows = 2;
    std::vector<float> x = random_floats(rows * n, 10 + n, -6.0f, 6.0f);
    if (n >= 4) {  // max ties and a +0/-0 pair in row 1
      x[n + 1] = 9.0f;
      x[n + n - 1] = 9.0f;
      x[n] = -0.0f;
      x[n + 2] = 0.0f;
    }
    const std::vector<float> w = random_floats(n, 20 + n);
    std::vector<float> want_norm(x.size()), want_p(x.size()), want_l(x.size());
    std::vector<std::int64_t> want_arg(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      ref::rms_norm(&x[r * n], w.data(), 1e-5f, &want_norm[r * n], n);
      ref::softmax(&x[r * n], &want_p[r * n], n);
      ref::log_softmax(&x[r * n], &want_l[r * n], n);
      want_arg[r] = ref::argmax(&x[r * n], n);
    }
    for (const unsigned threads : {256u, 32u}) {
      std::vector<float> y(x.size());
      emu::launch(dim3(rows), dim3(threads), chunk_bytes(n), rms_norm_kernel, x.data(), n, w.data(),
                  1e-5f, y.data(), n, n);
      EXPECT_TRUE(same_bits(y, want_norm)) << "rms_norm n=" << n << " threads=" << threads;
      emu::launch(dim3(rows), dim3(threads), chunk_bytes(n), softmax_kernel<false>, x.data(), n,
                  y.data(), n, n);
      EXPECT_TRUE(same_bits(y, want_p)) << "softmax n=" << n << " threads=" << threads;
      emu::launch(dim3(rows), dim3(threads), chunk_bytes(n), softmax_kernel<true>, x.data(), n,
                  y.data(), n, n);
      EXPECT_TRUE(same_bits(y, want_l)) << "log_softmax n=" << n << " threads=" << threads;
      std::vector<float> inplace(x);
      emu::launch(dim3(rows), dim3(threads), chunk_bytes(n), softmax_kernel<false>, inplace.data(),
                  n, inplace.data(), n, n);
      EXPECT_TRUE(same_bits(inplace, want_p)) << "in-place softmax n=" << n;
      std::vector<std::int64_t> arg(rows, -5);
      emu::launch(dim3(rows), dim3(threads), 0, argmax_kernel, x.data(), n, n, arg.data());
      EXPECT_EQ(arg, want_arg) << "argmax n=" << n;
    }
  }
  std::vector<float> nan_row = random_floats(100, 30);
  nan_row[57] = std::nanf("");
  std::int64_t arg = 0;
  emu::launch(dim3(1), dim3(256), 0, argmax_kernel, nan_row.data(), 100, 100, &arg);
  EXPECT_EQ(arg, -1);
}

TEST(CudaEmulation, ElementwiseKernelsEqualReference) {
  const std::int64_t n = 3001;
  const std::vector<float> g = random_floats(n, 40, -20.0f, 20.0f);
  const std::vector<float> u = random_floats(n, 41, -3.0f, 3.0f);
  std::vector<float> want(n), got(n);
  ref::silu_mul(g.data(), u.data(), want.data(), n);
  emu::launch(dim3(3), dim3(256), 0, silu_mul_kernel, g.data(), u.data(), got.data(), n);
  EXPECT_TRUE(same_bits(got, want));
  for (std::int64_t i = 0; i < n; ++i) want[i] = ref::exp_f32(g[i]);
  emu::launch(dim3(2), dim3(128), 0, exp_kernel, g.data(), got.data(), n);
  EXPECT_TRUE(same_bits(got, want));
  const std::vector<float> pos = random_floats(n, 42, 1e-30f, 1e5f);
  for (std::int64_t i = 0; i < n; ++i) want[i] = ref::log_f32(pos[i]);
  emu::launch(dim3(2), dim3(128), 0, log_kernel, pos.data(), got.data(), n);
  EXPECT_TRUE(same_bits(got, want));
  for (std::int64_t i = 0; i < n; ++i) want[i] = g[i] + u[i];
  emu::launch(dim3(1), dim3(64), 0, add_kernel, g.data(), u.data(), got.data(), n);
  EXPECT_TRUE(same_bits(got, want));
  std::vector<std::uint32_t> bits(n);
  emu::launch(dim3(2), dim3(64), 0, philox_kernel, std::uint64_t{99}, std::uint64_t{3},
              std::uint64_t{1} << 40, std::uint32_t{2}, bits.data(), n);
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_EQ(bits[i], ::detinfer::philox_bits(99, 3, (std::uint64_t{1} << 40) + i, 2));
}

TEST(CudaEmulation, RopeEmbeddingAndKvWriteEqualReference) {
  const std::int64_t rows = 3, heads = 2, d = 64, ldh = d + 2, ldx = heads * ldh + 1;
  const std::int64_t ld_table = d / 2 + 1;
  const std::vector<float> x = random_floats(rows * ldx, 50);
  const std::vector<float> cos = random_floats(10 * ld_table, 51);
  const std::vector<float> sin = random_floats(10 * ld_table, 52);
  const std::vector<std::int32_t> positions = {7, 0, 9};
  std::vector<float> want(x), got(x);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < heads; ++h)
      ref::rope(&want[r * ldx + h * ldh], d, &cos[positions[r] * ld_table],
                &sin[positions[r] * ld_table]);
  emu::launch(dim3(rows), dim3(256), 0, rope_kernel, got.data(), ldx, heads, ldh, d, cos.data(),
              sin.data(), ld_table, positions.data());
  EXPECT_TRUE(same_bits(got, want));

  const std::int64_t vocab = 50, dim = 40;
  const std::vector<std::uint16_t> table = random_f16(vocab * dim, 53);
  std::vector<std::int32_t> ids = {3, 49, 0, 50};  // the last one is out of range
  std::vector<float> out(4 * dim, 0.0f);
  int flag = 0;
  emu::launch(dim3(4), dim3(32), 0, embedding_kernel<core::DType::kF16>, ids.data(),
              static_cast<const void*>(table.data()), vocab, dim, out.data(), dim, &flag);
  for (int r = 0; r < 3; ++r)
    for (std::int64_t i = 0; i < dim; ++i)
      ASSERT_EQ(dm::bits_of(out[r * dim + i]), dm::bits_of(f16_to_f32(table[ids[r] * dim + i])));
  EXPECT_TRUE(std::isnan(out[3 * dim]));
  EXPECT_EQ(flag, 1);

  const std::int64_t kv_stride = 8, bs = 4, start = 3, n_new = 6;
  const std::vector<std::int32_t> blocks = {2, 0, 1};
  const std::vector<float> k = random_floats(n_new * kv_stride, 54);
  const std::vector<float> v = random_floats(n_new * kv_stride, 55);
  std::vector<float> kp(3 * bs * kv_stride, 0.0f), vp(3 * bs * kv_stride, 0.0f);
  emu::launch(dim3(n_new), dim3(32), 0, kv_write_kernel, k.data(), v.data(), kv_stride, start,
              blocks.data(), bs, kv_stride, kp.data(), vp.data(), core::DType::kF32);
  const PagedKvView view{kp.data(), vp.data(), blocks.data(), 3, bs, 1, kv_stride};
  for (std::int64_t r = 0; r < n_new; ++r) {
    ASSERT_EQ(std::memcmp(ref::kv_row(kp.data(), view, start + r, 0), &k[r * kv_stride], 32), 0);
    ASSERT_EQ(std::memcmp(ref::kv_row(vp.data(), view, start + r, 0), &v[r * kv_stride], 32), 0);
  }
}

// --- attention (emulated_attention.h) ---------------------------------------------------------
TEST(CudaEmulation, CanonicalAttentionEqualsReference) {
  struct Case {
    std::int64_t heads, kv_heads, d, bs;
    std::vector<std::int64_t> keys;
  };
  const Case cases[] = {
      {4, 2, 64, 16, {1, 64, 65, 300}}, {2, 1, 80, 7, {129, 3}}, {2, 2, 256, 32, {70}}};
  for (const Case& cs : cases) {
    const Cache c = make_cache(*std::max_element(cs.keys.begin(), cs.keys.end()), cs.kv_heads, cs.d,
                               cs.bs, 70 + cs.d);
    const auto rows = static_cast<std::int64_t>(cs.keys.size());
    const std::vector<float> q = random_floats(rows * cs.heads * cs.d, 71 + cs.d);
    std::vector<float> want(rows * cs.heads * cs.d);
    ref::attention(q.data(), cs.heads * cs.d, rows, cs.keys.data(), cs.heads, c.view, 0.125f,
                   want.data(), cs.heads * cs.d);
    for (const unsigned threads : {attention_threads(cs.d), attention_threads(cs.d) + 32})
      EXPECT_TRUE(same_bits(run_attention(false, c, cs.heads, cs.keys, q, threads), want))
          << "d=" << cs.d << " threads=" << threads;
  }
}

TEST(CudaEmulation, SplitAttentionIsInvariantAndAccurate) {
  const std::int64_t heads = 2, kv_heads = 1, d = 64, tokens = 600;
  const Cache c16 = make_cache(tokens, kv_heads, d, 16, 80);
  const Cache c5 = make_cache(tokens, kv_heads, d, 5, 81);
  const std::vector<std::int64_t> keys = {1, 256, 257, 600};
  const std::vector<float> q = random_floats(keys.size() * heads * d, 82);
  const std::vector<float> batch = run_attention(true, c16, heads, keys, q, 64);
  std::vector<float> want(batch.size());
  ref::attention(q.data(), heads * d, 4, keys.data(), heads, c16.view, 0.125f, want.data(),
                 heads * d);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(batch[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])));
  for (std::size_t r = 0; r < keys.size(); ++r) {
    const std::vector<float> qr(q.begin() + r * heads * d, q.begin() + (r + 1) * heads * d);
    const std::vector<float> wr(batch.begin() + r * heads * d, batch.begin() + (r + 1) * heads * d);
    EXPECT_TRUE(same_bits(run_attention(true, c16, heads, {keys[r]}, qr, 128), wr)) << r;
    EXPECT_TRUE(same_bits(run_attention(true, c5, heads, {keys[r]}, qr, 64), wr)) << r;
  }
}

TEST(CudaEmulation, SampleDrawEqualsCpuDraw) {
  for (const std::int64_t n : {1, 2, 50, 1000}) {
    decode::Candidates c;
    c.logits = random_floats(n, 90 + n, -6.0f, 6.0f);
    for (std::int64_t i = 0; i < n; i += 4) c.logits[i] = c.logits[0];  // ties
    c.ids.resize(n);
    std::iota(c.ids.begin(), c.ids.end(), 0);
    for (std::int64_t i = n - 1; i > 0; --i) std::swap(c.ids[i], c.ids[random_index(91, i, i + 1)]);
    const std::vector<float> p = decode::candidate_probs(c);
    std::int64_t padded = 1;
    while (padded < n) padded <<= 1;
    std::vector<std::uint64_t> keys(padded);
    std::vector<std::int32_t> pos(padded);
    emu::launch(dim3(1), dim3(64), 0, draw_keys_kernel, p.data(), c.ids.data(), n, padded,
                keys.data(), pos.data());
    for (std::int64_t k = 2; k <= padded; k <<= 1)
      for (std::int64_t j = k >> 1; j > 0; j >>= 1)
        emu::launch(dim3(1), dim3(64), 0, bitonic_step_kernel, keys.data(), pos.data(), padded, j,
                    k);
    for (std::uint64_t step = 0; step < 6; ++step) {
      std::int64_t got = -1;
      const std::uint64_t seed = 7 + step * 1000003;
      emu::launch(dim3(1), dim3(1), 0, draw_pick_kernel, p.data(),
                  static_cast<const std::int32_t*>(pos.data()), n, seed, step % 2, step, &got);
      EXPECT_EQ(static_cast<std::size_t>(got), decode::draw_index(c, seed, step % 2, step))
          << "n=" << n << " step=" << step;
    }
  }
}

// The GEMM's tiles, bounds, B transposition, bias and stores, with the WMMA model of
// cuda_emulator.h: accurate against double, and row m's bits do not depend on M or on
// where the row sits in its tile.
TEST(CudaEmulation, TensorCoreLinearTilingIsRightAndRowInvariant) {
  const std::int64_t n = 80, k = 48, ldx = 56, m_max = 70;  // partial N, K and M tiles
  const std::vector<std::uint16_t> x = to_bf16(random_floats(m_max * ldx, 110));
  const std::vector<std::uint16_t> w = to_bf16(random_floats(n * k, 111));
  const std::vector<float> bias = random_floats(n, 112);
  const auto run = [&](const std::uint16_t* xs, std::int64_t m) {
    std::vector<float> y(m * n, -9.0f);
    const dim3 grid(static_cast<unsigned>((n + kGemmTileN - 1) / kGemmTileN),
                    static_cast<unsigned>((m + kGemmTileM - 1) / kGemmTileM));
    emu::launch(grid, dim3(kGemmThreads), 0, gemm_bf16_kernel, xs, ldx, m, w.data(), n, k,
                bias.data(), y.data(), n);
    return y;
  };
  const std::vector<float> full = run(x.data(), m_max);
  for (std::int64_t r = 0; r < m_max; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = bias[j], mag = std::fabs(bias[j]);
      for (std::int64_t i = 0; i < k; ++i) {
        const double p = double(bf16_to_f32(x[r * ldx + i])) * bf16_to_f32(w[j * k + i]);
        s += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(full[r * n + j], s, 1e-5 * mag) << "r=" << r << " j=" << j;
    }
  }
  for (const std::int64_t m : {1, 3, 64, 65}) {
    const std::vector<float> part = run(x.data(), m);
    ASSERT_EQ(std::memcmp(part.data(), full.data(), part.size() * sizeof(float)), 0) << "M=" << m;
  }
  const std::vector<float> shifted = run(x.data() + 5 * ldx, m_max - 5);
  EXPECT_EQ(std::memcmp(shifted.data(), full.data() + 5 * n, shifted.size() * sizeof(float)), 0);
}

TEST(CudaEmulation, FastRmsNormIsRowInvariantAndAccurate) {
  const std::int64_t n = 1000, rows = 5;
  const std::vector<float> x = random_floats(rows * n, 100, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(n, 101);
  std::vector<float> all(rows * n), one(n), want(n);
  emu::launch(dim3(rows), dim3(kFastNormThreads), 0, rms_norm_fast_kernel, x.data(), n, w.data(),
              1e-6f, all.data(), n, n);
  emu::launch(dim3(1), dim3(kFastNormThreads), 0, rms_norm_fast_kernel, x.data() + 3 * n, n,
              w.data(), 1e-6f, one.data(), n, n);
  EXPECT_EQ(std::memcmp(one.data(), all.data() + 3 * n, n * sizeof(float)), 0);
  ref::rms_norm(x.data() + 3 * n, w.data(), 1e-6f, want.data(), n);
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(one[i], want[i], 1e-5f * (1 + std::fabs(want[i])));
  std::vector<std::uint16_t> b(n);
  emu::launch(dim3(2), dim3(64), 0, f32_to_bf16_kernel, x.data(), b.data(), n);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(b[i], dm::f32_to_bf16(x[i]));
}

}  // namespace
}  // namespace detinfer::kernels::cuda
