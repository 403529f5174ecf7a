// Linears run together in one parallel region (run_linears: q/k/v; run_gate_up_silu:
// gate/up + silu_mul) equal the reference bit for bit: every ISA, thread counts
// {1, 2, 3, 8}, row counts 1..64 on the edges of the 6-row register tiles, dtypes f32,
// bf16, f16, partial last panels, with and without bias.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"
#include "linear_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::first_diff;
using testing::IsaGuard;
using testing::pool_for;
using testing::random_floats;

constexpr int kThreadCounts[] = {1, 2, 3, 8};
constexpr std::int64_t kRowCounts[] = {1, 2, 3, 5, 6, 7, 12, 13, 16, 17, 31, 32, 33, 64};

using Linear = testing::TestLinear;

// q/k/v through run_linears (and v alone through PackedLinear::run) on m rows of x equal
// the reference on every ISA and thread count.
void expect_qkv_equal_reference(const Linear& q, const Linear& kk, const Linear& v, std::int64_t k,
                                std::int64_t m, std::uint64_t stream, const std::string& label) {
  const std::vector<float> x = random_floats(m * k, stream);
  const std::vector<float> wq = q.reference(x, m), wk = kk.reference(x, m), wv = v.reference(x, m);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (int t : kThreadCounts) {
      std::vector<float> gq(m * q.n, -1.0f), gk(m * kk.n, -1.0f), gv(m * v.n, -1.0f);
      const LinearOut outs[] = {
          {&q.packed, gq.data(), q.n}, {&kk.packed, gk.data(), kk.n}, {&v.packed, gv.data(), v.n}};
      run_linears(outs, 3, x.data(), k, m, pool_for(t));
      std::vector<float> sv(m * v.n, -1.0f);
      v.packed.run(x.data(), k, m, sv.data(), v.n, pool_for(t));
      const std::string what = label + " m=" + std::to_string(m) + " isa=" + to_string(isa) +
                               " threads=" + std::to_string(t);
      ASSERT_EQ(first_diff(gq.data(), wq.data(), m * q.n), -1) << "q " << what;
      ASSERT_EQ(first_diff(gk.data(), wk.data(), m * kk.n), -1) << "k " << what;
      ASSERT_EQ(first_diff(gv.data(), wv.data(), m * v.n), -1) << "v " << what;
      ASSERT_EQ(first_diff(sv.data(), wv.data(), m * v.n), -1) << "v alone " << what;
    }
  }
}

TEST(FusedLinear, QkvInOneRegionEqualsReference) {
  IsaGuard guard;
  std::uint64_t stream = 2000;
  for (core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    const std::int64_t k = 200;  // three 64-chunks and a partial one
    const Linear q(dtype, 96, k, stream += 4, true), kk(dtype, 32, k, stream += 4, true),
        v(dtype, 40, k, stream += 4, false);
    for (std::int64_t m : kRowCounts) {
      expect_qkv_equal_reference(q, kk, v, k, m, stream += 4, to_string(dtype));
      if (HasFatalFailure()) return;
    }
  }
}

// Wide outputs split into several claimed ranges per thread (split_panels in linear.cpp:
// 8 per thread, on 4-panel boundaries): range boundaries and the boundaries between q, k
// and v in the concatenation fall inside those ranges.
TEST(FusedLinear, WideOutputsSplitIntoManyRangesEqualReference) {
  IsaGuard guard;
  std::uint64_t stream = 4000;
  const std::int64_t k = 70;
  const Linear q(core::DType::kBF16, 1000, k, stream += 4, true),
      kk(core::DType::kBF16, 72, k, stream += 4, true),
      v(core::DType::kBF16, 1030, k, stream += 4, false);
  for (std::int64_t m : {1, 2, 7}) {
    expect_qkv_equal_reference(q, kk, v, k, m, stream += 4, "wide bf16");
    if (HasFatalFailure()) return;
  }
}

TEST(FusedLinear, GateUpSiluInOneRegionEqualsReference) {
  IsaGuard guard;
  std::uint64_t stream = 3000;
  struct Case {
    core::DType dtype;
    std::int64_t n;
  };
  // n = 150: partial last panel (3 panels, fewer ranges than threads); n = 2100: 33
  // panels, several claimed ranges per thread (split_panels in linear.cpp).
  for (const Case c : {Case{core::DType::kF32, 150}, Case{core::DType::kBF16, 150},
                       Case{core::DType::kBF16, 2100}}) {
    const core::DType dtype = c.dtype;
    const std::int64_t k = 130, n = c.n;  // k: a partial last chunk
    const Linear gate(dtype, n, k, stream += 4, false), up(dtype, n, k, stream += 4, false);
    for (std::int64_t m : kRowCounts) {
      if (n > 150 && m > 7) break;  // the wide case: the range split is what it checks
      const std::vector<float> x = random_floats(m * k, stream += 4, 3.0f);
      const std::vector<float> wg = gate.reference(x, m), wu = up.reference(x, m);
      std::vector<float> wa(m * n);
      ref::silu_mul(wg.data(), wu.data(), wa.data(), m * n);
      for (Isa isa : available_isas()) {
        set_isa(isa);
        for (int t : kThreadCounts) {
          std::vector<float> g(m * n, -1.0f), u(m * n, -1.0f), a(m * n, -1.0f);
          run_gate_up_silu(gate.packed, up.packed, x.data(), k, m, g.data(), u.data(), a.data(),
                           pool_for(t));
          const std::string what = std::string(to_string(dtype)) + " n=" + std::to_string(n) +
                                   " m=" + std::to_string(m) + " isa=" + to_string(isa) +
                                   " threads=" + std::to_string(t);
          ASSERT_EQ(first_diff(g.data(), wg.data(), m * n), -1) << "gate " << what;
          ASSERT_EQ(first_diff(u.data(), wu.data(), m * n), -1) << "up " << what;
          ASSERT_EQ(first_diff(a.data(), wa.data(), m * n), -1) << "silu " << what;
        }
      }
    }
  }
}

TEST(FusedLinear, MismatchedShapesAreErrors) {
  const Linear gate(core::DType::kF32, 64, 32, 1, false), up(core::DType::kF32, 65, 32, 2, false);
  std::vector<float> x(32), g(65), u(65), a(65);
  EXPECT_THROW(run_gate_up_silu(gate.packed, up.packed, x.data(), 32, 1, g.data(), u.data(),
                                a.data(), nullptr),
               Error);
  EXPECT_THROW(gate.packed.run_panels(x.data(), 32, 1, g.data(), 64, 0, 2), Error);
}

// A tied embedding reads its rows back from the packed lm_head: every row of every
// dtype, in full and partial panels, equals the exact widening of the source row.
TEST(PackedLinearRows, WidenRowEqualsTheSourceRowBitForBit) {
  std::uint64_t stream = 9000;
  for (core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    for (const std::int64_t n : {1, 63, 64, 65, 200}) {
      const Linear w(dtype, n, 70, stream += 4, false);
      std::vector<float> row(static_cast<std::size_t>(w.k), -1.0f);
      for (std::int64_t j = 0; j < n; ++j) {
        w.packed.widen_row(j, row.data());
        ASSERT_EQ(first_diff(row.data(), w.f32.data() + j * w.k, w.k), -1)
            << to_string(dtype) << " n=" << n << " row " << j;
      }
    }
  }
  const Linear w(core::DType::kBF16, 10, 8, 1, false);
  std::vector<float> row(8);
  EXPECT_THROW(w.packed.widen_row(10, row.data()), Error);
  EXPECT_THROW(w.packed.widen_row(-1, row.data()), Error);
  EXPECT_THROW(PackedLinear().widen_row(0, row.data()), Error);
}

}  // namespace
}  // namespace detinfer::kernels
