// GPU tests (label gpu): canonical kernels bitwise equal to the CPU reference on random
// shapes and data; device-invariant kernels bitwise invariant to batch size, row position,
// KV chunking and KV layout. Without a device every test is skipped, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "decode/logits_processor.h"
#include "decode/sampler.h"
#include "detinfer/error.h"
#include "kernels/cuda/device_math.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cuda {
namespace {

using test::first_bit_difference;
using test::random_f16;
using test::random_floats;
using test::random_index;
using test::to_bf16;
using test::to_device;
using test::to_host;

class CudaGpu : public ::testing::Test {
 protected:
  void SetUp() override { DETINFER_REQUIRE_CUDA_DEVICE(); }
};

// Names the device in the log (docs/gpu-results.md records it).
TEST_F(CudaGpu, ReportsDevice) {
  const std::string d = device_description(0);
  std::cout << "[ DEVICE   ] " << d << "\n";
  RecordProperty("device", d);
  EXPECT_FALSE(d.empty());
}

TEST_F(CudaGpu, ExpLogEqualReferenceOnASampleOfAllFloats) {
  std::vector<float> x;
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 251) {
    float f;
    const auto b = static_cast<std::uint32_t>(u);
    std::memcpy(&f, &b, sizeof f);
    x.push_back(f);
  }
  const DeviceBuffer dx = to_device(x);
  DeviceBuffer dy(x.size() * sizeof(float));
  for (const bool is_exp : {true, false}) {
    if (is_exp) {
      exp_f32(dx.as<float>(), dy.as<float>(), static_cast<std::int64_t>(x.size()), nullptr);
    } else {
      log_f32(dx.as<float>(), dy.as<float>(), static_cast<std::int64_t>(x.size()), nullptr);
    }
    const std::vector<float> y = to_host<float>(dy, x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want = is_exp ? ref::exp_f32(x[i]) : ref::log_f32(x[i]);
      if (want != want) {
        ASSERT_TRUE(y[i] != y[i]) << (is_exp ? "exp" : "log") << "(" << x[i] << ")";
      } else {
        ASSERT_EQ(std::memcmp(&y[i], &want, sizeof want), 0)
            << (is_exp ? "exp" : "log") << "(" << x[i] << "): " << y[i] << " vs " << want;
      }
    }
  }
}

struct LinearShape {
  std::int64_t m, n, k;
};

TEST_F(CudaGpu, CanonicalLinearEqualsReferenceForEveryDtype) {
  const LinearShape shapes[] = {{1, 1, 1},     {3, 5, 63},    {1, 17, 64},   {9, 33, 65},
                                {2, 7, 2047},  {17, 3, 2048}, {4, 13, 2049}, {1, 896, 896},
                                {8, 64, 4100}, {11, 9, 4864}};
  std::uint64_t seed = 100;
  for (const core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    for (const LinearShape& s : shapes) {
      ++seed;
      const std::int64_t ldx = s.k + 3;
      const std::int64_t ldy = s.n + 1;
      const std::vector<float> x = random_floats(s.m * ldx, seed);
      const std::vector<float> bias = random_floats(s.n, seed + 1000);
      const bool with_bias = seed % 2 == 0;
      std::vector<float> wf(s.n * s.k);
      DeviceBuffer dw;
      if (dtype == core::DType::kF32) {
        wf = random_floats(wf.size(), seed + 2000);
        dw = to_device(wf);
      } else {
        std::vector<std::uint16_t> w16 = dtype == core::DType::kBF16
                                             ? to_bf16(random_floats(wf.size(), seed + 2000))
                                             : random_f16(wf.size(), seed + 2000);
        for (std::size_t i = 0; i < wf.size(); ++i)
          wf[i] = dtype == core::DType::kBF16 ? bf16_to_f32(w16[i]) : f16_to_f32(w16[i]);
        dw = to_device(w16);
      }
      std::vector<float> want(s.m * ldy, 0.0f);
      ref::linear(x.data(), ldx, s.m, wf.data(), s.n, s.k, with_bias ? bias.data() : nullptr,
                  want.data(), ldy);
      const DeviceBuffer dx = to_device(x);
      const DeviceBuffer db = to_device(bias);
      DeviceBuffer dy = to_device(std::vector<float>(want.size(), 0.0f));
      linear(dx.as<float>(), ldx, s.m, dw.data(), dtype, s.n, s.k,
             with_bias ? db.as<float>() : nullptr, dy.as<float>(), ldy, nullptr);
      const std::vector<float> got = to_host<float>(dy, want.size());
      EXPECT_EQ(first_bit_difference(got, want), -1)
          << to_string(dtype) << " m=" << s.m << " n=" << s.n << " k=" << s.k;
    }
  }
}

// Weights one element past a 16-byte boundary take the scalar staging path; the bits
// must not change.
TEST_F(CudaGpu, CanonicalLinearUnalignedWeightsEqualReference) {
  const std::int64_t m = 3, n = 21, k = 2048 + 64;
  const std::vector<float> x = random_floats(m * k, 150);
  const std::vector<std::uint16_t> w16 = to_bf16(random_floats(n * k + 1, 151));
  std::vector<float> wf(n * k);
  for (std::int64_t i = 0; i < n * k; ++i) wf[i] = bf16_to_f32(w16[i + 1]);
  std::vector<float> want(m * n);
  ref::linear(x.data(), k, m, wf.data(), n, k, nullptr, want.data(), n);
  const DeviceBuffer dx = to_device(x);
  const DeviceBuffer dw = to_device(w16);
  DeviceBuffer dy(m * n * sizeof(float));
  linear(dx.as<float>(), k, m, dw.as<std::uint16_t>() + 1, core::DType::kBF16, n, k, nullptr,
         dy.as<float>(), n, nullptr);
  EXPECT_EQ(first_bit_difference(to_host<float>(dy, m * n), want), -1);
}

TEST_F(CudaGpu, AddAndKvWriteAreExact) {
  const std::int64_t n = 5000;
  const std::vector<float> a = random_floats(n, 160);
  const std::vector<float> b = random_floats(n, 161);
  std::vector<float> want(n);
  for (std::int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  DeviceBuffer da = to_device(a);
  const DeviceBuffer db = to_device(b);
  add(da.as<float>(), db.as<float>(), da.as<float>(), n, nullptr);  // in place
  EXPECT_EQ(first_bit_difference(to_host<float>(da, n), want), -1);

  // Tokens 5..24 of a sequence written into blocks of 8 via a permuted table; the
  // paged cache read back through kv_row must hold exactly the rows written.
  const std::int64_t kv_stride = 2 * 64, ld = kv_stride + 3, start = 5, rows = 20, bs = 8;
  const std::vector<std::int32_t> table = {3, 0, 2, 1};
  const std::vector<float> k = random_floats(rows * ld, 162);
  const std::vector<float> v = random_floats(rows * ld, 163);
  DeviceBuffer dk = to_device(k);
  DeviceBuffer dv = to_device(v);
  const DeviceBuffer dt = to_device(table);
  DeviceBuffer kp = to_device(std::vector<float>(4 * bs * kv_stride, 0.0f));
  DeviceBuffer vp = to_device(std::vector<float>(4 * bs * kv_stride, 0.0f));
  kv_write(dk.as<float>(), dv.as<float>(), ld, rows, start, dt.as<std::int32_t>(), bs, kv_stride,
           kp.as<float>(), vp.as<float>(), core::DType::kF32, nullptr);
  const std::vector<float> hk = to_host<float>(kp, 4 * bs * kv_stride);
  const std::vector<float> hv = to_host<float>(vp, 4 * bs * kv_stride);
  const PagedKvView view{hk.data(), hv.data(), table.data(), 4, bs, 2, 64};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < 2; ++h) {
      ASSERT_EQ(std::memcmp(ref::kv_row(view.k_pool, view, start + r, h), &k[r * ld + h * 64],
                            64 * sizeof(float)),
                0);
      ASSERT_EQ(std::memcmp(ref::kv_row(view.v_pool, view, start + r, h), &v[r * ld + h * 64],
                            64 * sizeof(float)),
                0);
    }
  }
}

TEST_F(CudaGpu, CanonicalRmsNormEqualsReferenceIncludingInPlace) {
  for (const std::int64_t n : {1, 63, 64, 65, 896, 3000, 8192}) {
    const std::int64_t rows = 5;
    const std::int64_t ld = n + 2;
    const std::vector<float> x = random_floats(rows * ld, 300 + n, -3.0f, 3.0f);
    const std::vector<float> w = random_floats(n, 400 + n);
    std::vector<float> want(x);
    for (std::int64_t r = 0; r < rows; ++r)
      ref::rms_norm(x.data() + r * ld, w.data(), 1e-6f, want.data() + r * ld, n);
    const DeviceBuffer dw = to_device(w);
    DeviceBuffer dx = to_device(x);
    DeviceBuffer dy = to_device(x);
    rms_norm(dx.as<float>(), ld, dw.as<float>(), 1e-6f, dy.as<float>(), ld, rows, n, nullptr);
    EXPECT_EQ(first_bit_difference(to_host<float>(dy, want.size()), want), -1) << "n=" << n;
    rms_norm(dx.as<float>(), ld, dw.as<float>(), 1e-6f, dx.as<float>(), ld, rows, n, nullptr);
    EXPECT_EQ(first_bit_difference(to_host<float>(dx, want.size()), want), -1)
        << "in place, n=" << n;
  }
}

TEST_F(CudaGpu, CanonicalSoftmaxAndLogSoftmaxEqualReference) {
  for (const std::int64_t n : {1, 7, 64, 65, 1000, 151936}) {
    const std::int64_t rows = 3;
    std::vector<float> x = random_floats(rows * n, 500 + n, -20.0f, 20.0f);
    // Row 2 has its maximum twice and a +0/-0 pair, exercising the tie rule.
    if (n >= 4) {
      x[2 * n + 1] = 30.0f;
      x[2 * n + n - 1] = 30.0f;
      x[2 * n + 0] = -0.0f;
      x[2 * n + 2] = 0.0f;
    }
    std::vector<float> want_p(x.size());
    std::vector<float> want_l(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      ref::softmax(x.data() + r * n, want_p.data() + r * n, n);
      ref::log_softmax(x.data() + r * n, want_l.data() + r * n, n);
    }
    const DeviceBuffer dx = to_device(x);
    DeviceBuffer dy(x.size() * sizeof(float));
    softmax(dx.as<float>(), n, dy.as<float>(), n, rows, n, nullptr);
    EXPECT_EQ(first_bit_difference(to_host<float>(dy, x.size()), want_p), -1) << "n=" << n;
    log_softmax(dx.as<float>(), n, dy.as<float>(), n, rows, n, nullptr);
    EXPECT_EQ(first_bit_difference(to_host<float>(dy, x.size()), want_l), -1) << "n=" << n;
  }
}

TEST_F(CudaGpu, CanonicalSiluMulEqualsReference) {
  const std::int64_t n = 100003;
  const std::vector<float> g = random_floats(n, 600, -20.0f, 20.0f);
  const std::vector<float> u = random_floats(n, 601, -3.0f, 3.0f);
  std::vector<float> want(n);
  ref::silu_mul(g.data(), u.data(), want.data(), n);
  const DeviceBuffer dg = to_device(g);
  const DeviceBuffer du = to_device(u);
  DeviceBuffer dout(n * sizeof(float));
  silu_mul(dg.as<float>(), du.as<float>(), dout.as<float>(), n, nullptr);
  EXPECT_EQ(first_bit_difference(to_host<float>(dout, n), want), -1);
}

TEST_F(CudaGpu, ArgmaxTiesToLowestIndexAndNanIsAnError) {
  const std::int64_t n = 151936;
  const std::int64_t rows = 4;
  std::vector<float> x = random_floats(rows * n, 700, -10.0f, 10.0f);
  x[1 * n + 777] = 50.0f;
  x[1 * n + 90000] = 50.0f;
  x[1 * n + 12] = 50.0f;
  const DeviceBuffer dx = to_device(x);
  DeviceBuffer dout(rows * sizeof(std::int64_t));
  argmax(dx.as<float>(), n, rows, n, dout.as<std::int64_t>(), nullptr);
  std::vector<std::int64_t> got(rows);
  argmax_to_host(dout.as<std::int64_t>(), rows, got.data(), nullptr);
  for (std::int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[r], ref::argmax(x.data() + r * n, n));
  EXPECT_EQ(got[1], 12);
  x[3 * n + 5] = std::nanf("");
  const DeviceBuffer dnan = to_device(x);
  argmax(dnan.as<float>(), n, rows, n, dout.as<std::int64_t>(), nullptr);
  try {
    argmax_to_host(dout.as<std::int64_t>(), rows, got.data(), nullptr);
    ADD_FAILURE() << "a NaN row must be an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("row 3"), std::string::npos) << e.what();
  }
}

TEST_F(CudaGpu, CanonicalRopeEqualsReference) {
  const std::int64_t rows = 5, heads = 6, d = 128, ldh = d + 4, ldx = heads * ldh + 8;
  const std::int64_t max_pos = 64, ld_table = d / 2 + 3;
  const std::vector<float> x = random_floats(rows * ldx, 800, -4.0f, 4.0f);
  const std::vector<float> cos = random_floats(max_pos * ld_table, 801);
  const std::vector<float> sin = random_floats(max_pos * ld_table, 802);
  std::vector<std::int32_t> pos(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    pos[r] = static_cast<std::int32_t>(random_index(803, r, max_pos));
  std::vector<float> want(x);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < heads; ++h)
      ref::rope(want.data() + r * ldx + h * ldh, d, cos.data() + pos[r] * ld_table,
                sin.data() + pos[r] * ld_table);
  DeviceBuffer dx = to_device(x);
  const DeviceBuffer dc = to_device(cos);
  const DeviceBuffer ds = to_device(sin);
  const DeviceBuffer dp = to_device(pos);
  rope(dx.as<float>(), rows, ldx, heads, ldh, d, dc.as<float>(), ds.as<float>(), ld_table,
       dp.as<std::int32_t>(), nullptr);
  EXPECT_EQ(first_bit_difference(to_host<float>(dx, x.size()), want), -1);
}

TEST_F(CudaGpu, EmbeddingWidensExactlyAndFlagsBadIds) {
  const std::int64_t vocab = 1000, dim = 96, rows = 7;
  std::vector<std::int32_t> ids(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    ids[r] = static_cast<std::int32_t>(random_index(900, r, vocab));
  const std::vector<float> tf = random_floats(vocab * dim, 901);
  const std::vector<std::uint16_t> tb = to_bf16(tf);
  const std::vector<std::uint16_t> th = random_f16(vocab * dim, 902);
  for (const core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    const DeviceBuffer table = dtype == core::DType::kF32    ? to_device(tf)
                               : dtype == core::DType::kBF16 ? to_device(tb)
                                                             : to_device(th);
    const DeviceBuffer did = to_device(ids);
    DeviceBuffer dout(rows * dim * sizeof(float));
    DeviceBuffer flag = to_device(std::vector<std::int32_t>{0});
    embedding(did.as<std::int32_t>(), rows, table.data(), dtype, vocab, dim, dout.as<float>(), dim,
              flag.as<std::int32_t>(), nullptr);
    std::vector<float> want(rows * dim);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < dim; ++i) {
        const std::size_t at = ids[r] * dim + i;
        want[r * dim + i] = dtype == core::DType::kF32    ? tf[at]
                            : dtype == core::DType::kBF16 ? bf16_to_f32(tb[at])
                                                          : f16_to_f32(th[at]);
      }
    EXPECT_EQ(first_bit_difference(to_host<float>(dout, want.size()), want), -1)
        << to_string(dtype);
    EXPECT_EQ(to_host<std::int32_t>(flag, 1)[0], 0);
    std::vector<std::int32_t> bad(ids);
    bad[3] = static_cast<std::int32_t>(vocab);
    const DeviceBuffer dbad = to_device(bad);
    embedding(dbad.as<std::int32_t>(), rows, table.data(), dtype, vocab, dim, dout.as<float>(), dim,
              flag.as<std::int32_t>(), nullptr);
    EXPECT_EQ(to_host<std::int32_t>(flag, 1)[0], 1);
    EXPECT_TRUE(std::isnan(to_host<float>(dout, rows * dim)[3 * dim]));
  }
}

TEST_F(CudaGpu, PhiloxEqualsCpuGenerator) {
  const std::int64_t n = 100000;
  DeviceBuffer d(n * sizeof(std::uint32_t));
  for (std::uint32_t lane = 0; lane < 4; ++lane) {
    philox_fill(0x123456789abcdefull, 7 + lane, 1ull << 33, lane, d.as<std::uint32_t>(), n,
                nullptr);
    const std::vector<std::uint32_t> got = to_host<std::uint32_t>(d, n);
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i],
                ::detinfer::philox_bits(0x123456789abcdefull, 7 + lane, (1ull << 33) + i, lane));
  }
}

// The GPU draw picks exactly what decode::draw_index picks on the CPU.
TEST_F(CudaGpu, SampleDrawEqualsCpuDraw) {
  for (const std::int64_t n : {1, 2, 50, 1000, 151936}) {
    decode::Candidates c;
    c.logits = random_floats(n, 1000 + n, -8.0f, 8.0f);
    for (std::int64_t i = 0; i < n; i += 5) c.logits[i] = c.logits[0];  // probability ties
    c.ids.resize(n);
    std::iota(c.ids.begin(), c.ids.end(), 0);
    for (std::int64_t i = n - 1; i > 0; --i)
      std::swap(c.ids[i], c.ids[random_index(1001, i, i + 1)]);  // distinct, shuffled ids
    const DeviceBuffer dl = to_device(c.logits);
    const DeviceBuffer did = to_device(c.ids);
    DeviceBuffer dp(n * sizeof(float));
    softmax(dl.as<float>(), n, dp.as<float>(), n, 1, n, nullptr);
    ASSERT_EQ(first_bit_difference(to_host<float>(dp, n), decode::candidate_probs(c)), -1);
    DeviceBuffer ws(sample_draw_workspace_bytes(n));
    DeviceBuffer out(sizeof(std::int64_t));
    for (std::uint64_t step = 0; step < 12; ++step) {
      const std::uint64_t seed = 42 + step * 1000003;
      sample_draw(dp.as<float>(), did.as<std::int32_t>(), n, seed, step % 3, step,
                  out.as<std::int64_t>(), ws.data(), ws.bytes(), nullptr);
      const std::int64_t got = to_host<std::int64_t>(out, 1)[0];
      EXPECT_EQ(static_cast<std::size_t>(got), decode::draw_index(c, seed, step % 3, step))
          << "n=" << n << " step=" << step;
    }
  }
}

// --- attention ---------------------------------------------------------------------------
// A paged cache whose logical contents (token t, kv head h) do not depend on the block
// size or on which pool blocks hold them.
struct PagedCache {
  std::int64_t tokens, kv_heads, d, block_size;
  std::vector<float> k, v;
  std::vector<std::int32_t> table;
  DeviceBuffer dk, dv, dtable;

  PagedCache(std::int64_t tokens_, std::int64_t kv_heads_, std::int64_t d_, std::int64_t bs,
             std::uint64_t layout_seed)
      : tokens(tokens_), kv_heads(kv_heads_), d(d_), block_size(bs) {
    const std::int64_t blocks = (tokens + bs - 1) / bs;
    const std::int64_t pool = blocks + 3;
    std::vector<std::int32_t> perm(pool);
    std::iota(perm.begin(), perm.end(), 0);
    for (std::int64_t i = pool - 1; i > 0; --i)
      std::swap(perm[i], perm[random_index(layout_seed, i, i + 1)]);
    table.assign(perm.begin(), perm.begin() + blocks);
    const std::int64_t stride = kv_heads * d;
    k.assign(pool * bs * stride, 1e30f);  // unused slots hold garbage that must not leak in
    v.assign(pool * bs * stride, -1e30f);
    const std::vector<float> lk = random_floats(tokens * stride, 31, -2.0f, 2.0f);
    const std::vector<float> lv = random_floats(tokens * stride, 32, -2.0f, 2.0f);
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t at = (table[t / bs] * bs + t % bs) * stride;
      std::copy_n(lk.begin() + t * stride, stride, k.begin() + at);
      std::copy_n(lv.begin() + t * stride, stride, v.begin() + at);
    }
    dk = to_device(k);
    dv = to_device(v);
    dtable = to_device(table);
  }

  PagedKvView host_view() const {
    return PagedKvView{
        k.data(), v.data(), table.data(), static_cast<std::int64_t>(table.size()), block_size,
        kv_heads, d};
  }
  PagedKvView device_view() const {
    return PagedKvView{dk.as<float>(),
                       dv.as<float>(),
                       dtable.as<std::int32_t>(),
                       static_cast<std::int64_t>(table.size()),
                       block_size,
                       kv_heads,
                       d};
  }
};

struct AttnCase {
  std::int64_t heads, kv_heads, d, block_size;
  std::vector<std::int64_t> keys;  // one query row per entry
};

std::vector<AttnCase> attention_cases() {
  return {{4, 2, 64, 16, {1, 63, 64, 65, 300}},
          {2, 2, 128, 7, {5, 129, 256, 257}},
          {6, 1, 80, 1, {2, 70, 513}},
          {14, 2, 64, 16, {2048}},
          {4, 4, 256, 32, {100, 1}}};
}

// Runs canonical (split = false) or split attention for the given rows.
std::vector<float> run_attention(bool split, const PagedCache& cache, std::int64_t heads,
                                 const std::vector<std::int64_t>& keys, const std::vector<float>& q,
                                 std::int64_t ldq, float scale) {
  const auto rows = static_cast<std::int64_t>(keys.size());
  const std::int64_t ldo = heads * cache.d;
  const DeviceBuffer dq = to_device(q);
  const DeviceBuffer dkeys = to_device(keys);
  DeviceBuffer dout = to_device(std::vector<float>(rows * ldo, 0.0f));
  if (split) {
    const std::int64_t max_keys = *std::max_element(keys.begin(), keys.end());
    DeviceBuffer ws(attention_split_workspace_bytes(rows, heads, cache.d, max_keys));
    attention_split(dq.as<float>(), ldq, rows, dkeys.as<std::int64_t>(), max_keys, heads,
                    cache.device_view(), scale, dout.as<float>(), ldo, ws.data(), ws.bytes(),
                    nullptr);
  } else {
    cuda::attention(dq.as<float>(), ldq, rows, dkeys.as<std::int64_t>(), heads, cache.device_view(),
                    scale, dout.as<float>(), ldo, nullptr);
  }
  return to_host<float>(dout, rows * ldo);
}

TEST_F(CudaGpu, CanonicalAttentionEqualsReference) {
  for (const AttnCase& c : attention_cases()) {
    const std::int64_t max_keys = *std::max_element(c.keys.begin(), c.keys.end());
    const PagedCache cache(max_keys, c.kv_heads, c.d, c.block_size, 40 + c.d);
    const auto rows = static_cast<std::int64_t>(c.keys.size());
    const std::int64_t ldq = c.heads * c.d + 5;
    const std::vector<float> q = random_floats(rows * ldq, 41 + c.d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    std::vector<float> want(rows * c.heads * c.d);
    ref::attention(q.data(), ldq, rows, c.keys.data(), c.heads, cache.host_view(), scale,
                   want.data(), c.heads * c.d);
    EXPECT_EQ(
        first_bit_difference(run_attention(false, cache, c.heads, c.keys, q, ldq, scale), want), -1)
        << "heads=" << c.heads << " d=" << c.d << " block=" << c.block_size;
  }
}

// The split kernel: close to the reference, and the same bits for a row whatever the
// batch, the row's position, the block size and the block layout (prefill vs decode vs
// a prefix-cache hit that placed the same K/V in other blocks).
TEST_F(CudaGpu, SplitAttentionIsInvariantToBatchChunkingAndLayout) {
  for (const AttnCase& c : attention_cases()) {
    const std::int64_t max_keys = *std::max_element(c.keys.begin(), c.keys.end());
    const PagedCache cache(max_keys, c.kv_heads, c.d, c.block_size, 50 + c.d);
    const auto rows = static_cast<std::int64_t>(c.keys.size());
    const std::int64_t ldq = c.heads * c.d;
    const std::int64_t ldo = ldq;
    const std::vector<float> q = random_floats(rows * ldq, 51 + c.d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    const std::vector<float> batch = run_attention(true, cache, c.heads, c.keys, q, ldq, scale);
    std::vector<float> want(rows * ldo);
    ref::attention(q.data(), ldq, rows, c.keys.data(), c.heads, cache.host_view(), scale,
                   want.data(), ldo);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(batch[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << "i=" << i;
    const PagedCache other(max_keys, c.kv_heads, c.d, c.block_size == 1 ? 5 : 1, 77);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> qr(q.begin() + r * ldq, q.begin() + (r + 1) * ldq);
      const std::vector<float> want_r(batch.begin() + r * ldo, batch.begin() + (r + 1) * ldo);
      EXPECT_EQ(first_bit_difference(
                    run_attention(true, cache, c.heads, {c.keys[r]}, qr, ldq, scale), want_r),
                -1)
          << "alone vs batch, row " << r;
      EXPECT_EQ(first_bit_difference(
                    run_attention(true, other, c.heads, {c.keys[r]}, qr, ldq, scale), want_r),
                -1)
          << "other block size/layout, row " << r;
    }
  }
}

// Prefill of T rows (row t sees t+1 keys) equals T single-row decode steps, bit for bit,
// for both kernels.
TEST_F(CudaGpu, PrefillRowsEqualDecodeSteps) {
  const std::int64_t tokens = 300, heads = 4, kv_heads = 2, d = 64;
  const PagedCache cache(tokens, kv_heads, d, 16, 60);
  const std::int64_t ldq = heads * d;
  const std::vector<float> q = random_floats(tokens * ldq, 61);
  std::vector<std::int64_t> keys(tokens);
  std::iota(keys.begin(), keys.end(), 1);
  for (const bool split : {false, true}) {
    const std::vector<float> prefill = run_attention(split, cache, heads, keys, q, ldq, 0.125f);
    for (std::int64_t t = 0; t < tokens; t += 37) {
      const std::vector<float> qt(q.begin() + t * ldq, q.begin() + (t + 1) * ldq);
      const std::vector<float> want(prefill.begin() + t * ldq, prefill.begin() + (t + 1) * ldq);
      EXPECT_EQ(
          first_bit_difference(run_attention(split, cache, heads, {t + 1}, qt, ldq, 0.125f), want),
          -1)
          << (split ? "split" : "canonical") << " t=" << t;
    }
  }
}

// --- device-invariant linear and RMSNorm ----------------------------------------------------
TEST_F(CudaGpu, TensorCoreLinearIsBatchInvariantForM1To256) {
  const std::int64_t n = 200, k = 520, ldx = 528, m_max = 256;
  const std::vector<std::uint16_t> x = to_bf16(random_floats(m_max * ldx, 70));
  const std::vector<std::uint16_t> w = to_bf16(random_floats(n * k, 71));
  const std::vector<float> bias = random_floats(n, 72);
  const DeviceBuffer dx = to_device(x);
  const DeviceBuffer dw = to_device(w);
  const DeviceBuffer db = to_device(bias);
  DeviceBuffer dy(m_max * n * sizeof(float));
  linear_bf16_tc(dx.as<std::uint16_t>(), ldx, m_max, dw.as<std::uint16_t>(), n, k, db.as<float>(),
                 dy.as<float>(), n, nullptr);
  const std::vector<float> full = to_host<float>(dy, m_max * n);
  // Accuracy against a double-precision product of the same bf16 values.
  for (std::int64_t r = 0; r < m_max; r += 17) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (std::int64_t i = 0; i < k; ++i) {
        const double p = double(bf16_to_f32(x[r * ldx + i])) * bf16_to_f32(w[j * k + i]);
        s += p;
        mag += std::fabs(p);
      }
      // Loose enough for tensor-core accumulation (not IEEE round-to-nearest on every
      // GPU); an indexing error shows up as an O(1) difference.
      ASSERT_NEAR(full[r * n + j], s + bias[j], 1e-4 * mag + 1e-6) << "r=" << r << " j=" << j;
    }
  }
  for (std::int64_t m = 1; m <= m_max; ++m) {
    DeviceBuffer dm_out(m * n * sizeof(float));
    linear_bf16_tc(dx.as<std::uint16_t>(), ldx, m, dw.as<std::uint16_t>(), n, k, db.as<float>(),
                   dm_out.as<float>(), n, nullptr);
    const std::vector<float> got = to_host<float>(dm_out, m * n);
    ASSERT_EQ(std::memcmp(got.data(), full.data(), got.size() * sizeof(float)), 0) << "M=" << m;
  }
  // A row gives the same bits at another position inside the tile (rows shifted by 3).
  DeviceBuffer dshift((m_max - 3) * n * sizeof(float));
  linear_bf16_tc(dx.as<std::uint16_t>() + 3 * ldx, ldx, m_max - 3, dw.as<std::uint16_t>(), n, k,
                 db.as<float>(), dshift.as<float>(), n, nullptr);
  const std::vector<float> shifted = to_host<float>(dshift, (m_max - 3) * n);
  EXPECT_EQ(std::memcmp(shifted.data(), full.data() + 3 * n, shifted.size() * sizeof(float)), 0);
}

TEST_F(CudaGpu, FastRmsNormIsBatchInvariantAndAccurate) {
  const std::int64_t n = 3584, rows = 64;
  const std::vector<float> x = random_floats(rows * n, 80, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(n, 81);
  const DeviceBuffer dx = to_device(x);
  const DeviceBuffer dw = to_device(w);
  DeviceBuffer dy(rows * n * sizeof(float));
  rms_norm_fast(dx.as<float>(), n, dw.as<float>(), 1e-6f, dy.as<float>(), n, rows, n, nullptr);
  const std::vector<float> full = to_host<float>(dy, rows * n);
  std::vector<float> want(n);
  ref::rms_norm(x.data() + 5 * n, w.data(), 1e-6f, want.data(), n);
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(full[5 * n + i], want[i], 1e-5f * (1.0f + std::fabs(want[i])));
  for (std::int64_t m = 1; m <= rows; m += 7) {
    DeviceBuffer dm_out(m * n * sizeof(float));
    rms_norm_fast(dx.as<float>() + (rows - m) * n, n, dw.as<float>(), 1e-6f, dm_out.as<float>(), n,
                  m, n, nullptr);
    const std::vector<float> got = to_host<float>(dm_out, m * n);
    ASSERT_EQ(std::memcmp(got.data(), full.data() + (rows - m) * n, got.size() * sizeof(float)), 0)
        << "rows=" << m;
  }
}

TEST_F(CudaGpu, OutOfMemoryIsResourceExhausted) {
  try {
    DeviceBuffer b(std::size_t{1} << 50);
    ADD_FAILURE() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
  }
}

}  // namespace
}  // namespace detinfer::kernels::cuda
