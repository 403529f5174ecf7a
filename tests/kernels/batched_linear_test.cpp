// The register-blocked linear for many rows (batched decode, M = 2..64, and prefill)
// equals the reference bit for bit: every ISA this CPU runs, threads {1, 2, 3, 8}, every
// M in 1..64 on one shape and the tile edges on others; K over several weight blocks
// (128 k of f32, 256 k of bf16/f16) and not a multiple of 64; N with a partial last
// panel and a partial last register tile; f32/bf16/f16, with and without bias;
// PackedLinear::run, and run_panels over sub-ranges (where the next-block prefetch
// stops at the range's end); more rows than one 256-row block.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "linear_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::first_diff;
using testing::IsaGuard;
using testing::pool_for;
using testing::random_floats;

struct Shape {
  std::int64_t n, k;
};

// A random linear of shape s and its reference.
struct Case : testing::TestLinear {
  Case(core::DType dtype, Shape s, std::uint64_t stream, bool with_bias)
      : TestLinear(dtype, s.n, s.k, stream, with_bias) {}
};

std::string describe(core::DType dtype, Shape s, std::int64_t m, Isa isa, int threads) {
  return std::string(to_string(dtype)) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         " m=" + std::to_string(m) + " isa=" + to_string(isa) +
         " threads=" + std::to_string(threads);
}

// Runs every ISA x thread count on rows 1..m_max (or the listed ones) of one case.
void check_case(core::DType dtype, Shape s, bool bias, const std::vector<std::int64_t>& rows,
                std::uint64_t stream) {
  const Case c(dtype, s, stream, bias);
  std::int64_t m_max = 0;
  for (std::int64_t m : rows) m_max = m > m_max ? m : m_max;
  const std::vector<float> x = random_floats(m_max * s.k, stream + 7, 2.0f);
  for (std::int64_t m : rows) {
    const std::vector<float> want = c.reference(x, m);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (int t : {1, 2, 3, 8}) {
        std::vector<float> got(m * s.n, -1.0f);
        c.packed.run(x.data(), s.k, m, got.data(), s.n, pool_for(t));
        ASSERT_EQ(first_diff(got.data(), want.data(), m * s.n), -1)
            << describe(dtype, s, m, isa, t);
      }
    }
  }
}

std::vector<std::int64_t> all_rows() {
  std::vector<std::int64_t> v;
  for (std::int64_t m = 1; m <= 64; ++m) v.push_back(m);
  return v;
}

const std::vector<std::int64_t> kEdgeRows = {1, 2, 5, 6, 7, 12, 13, 16, 17, 31, 32, 33, 64};

// K = 330: bf16 one full 256-k block and a partial one, f32 two 128-k blocks and a
// partial one, each ending in a partial 64-chunk;
// N = 136: three panels, the last with 8 columns (a partial tile for every ISA).
TEST(BatchedLinear, EveryRowCountEqualsReference) {
  IsaGuard guard;
  check_case(core::DType::kBF16, {136, 330}, true, all_rows(), 100);
  check_case(core::DType::kF32, {136, 330}, false, all_rows(), 200);
}

TEST(BatchedLinear, BlockAndChunkEdgesEqualReference) {
  IsaGuard guard;
  std::uint64_t stream = 300;
  // K exactly one and two blocks, one past a block, a block plus a partial chunk, less
  // than one chunk; N a full panel, a panel plus 2 columns, under one AVX2 tile.
  for (Shape s : {Shape{64, 256}, Shape{130, 512}, Shape{66, 257}, Shape{96, 300}, Shape{7, 40}})
    for (core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16})
      check_case(dtype, s, dtype != core::DType::kF16, kEdgeRows, stream += 16);
}

// A prefill step of more rows than a row block (256): the blocks, and a row range of a
// thread ending inside one, give the reference's bits (run and run_panels).
TEST(BatchedLinear, RowsBeyondOneRowBlockEqualReference) {
  IsaGuard guard;
  check_case(core::DType::kBF16, {130, 96}, true, {255, 256, 257, 601}, 700);
  const Shape s{130, 96};
  const Case c(core::DType::kF32, s, 710, false);
  const std::int64_t m = 530;
  const std::vector<float> x = random_floats(m * s.k, 711);
  const std::vector<float> want = c.reference(x, m);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    std::vector<float> got(m * s.n, -1.0f);
    c.packed.run_panels(x.data(), s.k, m, got.data(), s.n, 0, c.packed.panels());
    ASSERT_EQ(first_diff(got.data(), want.data(), m * s.n), -1)
        << describe(core::DType::kF32, s, m, isa, 1);
  }
}

// run_panels over sub-ranges: a thread's range ends before the last panel, so the
// prefetch of the next panel must stop there; any split gives the reference's bits.
TEST(BatchedLinear, PanelSubRangesEqualReference) {
  IsaGuard guard;
  const Shape s{320, 600};  // 5 panels
  const Case c(core::DType::kBF16, s, 500, true);
  for (std::int64_t m : {1, 4, 16, 33}) {
    const std::vector<float> x = random_floats(m * s.k, 501 + m);
    const std::vector<float> want = c.reference(x, m);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      std::vector<float> got(m * s.n, -1.0f);
      for (std::int64_t p0 = 0, p1 = 0; p0 < c.packed.panels(); p0 = p1) {
        p1 = p0 + 1 + p0 % 2;  // ranges of 1, 2, 1, 2, ... panels
        if (p1 > c.packed.panels()) p1 = c.packed.panels();
        c.packed.run_panels(x.data(), s.k, m, got.data(), s.n, p0, p1);
      }
      ASSERT_EQ(first_diff(got.data(), want.data(), m * s.n), -1)
          << describe(core::DType::kBF16, s, m, isa, 1);
    }
  }
}

// Rows are independent: each row of a batch equals the same row run alone (M = 1), for
// rows at every position of the register tiles.
TEST(BatchedLinear, EachRowEqualsItsSingleRowRun) {
  IsaGuard guard;
  const Shape s{136, 700};
  const Case c(core::DType::kBF16, s, 600, true);
  const std::int64_t m = 40;
  const std::vector<float> x = random_floats(m * s.k, 601);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    std::vector<float> batch(m * s.n), one(s.n);
    c.packed.run(x.data(), s.k, m, batch.data(), s.n, pool_for(2));
    for (std::int64_t r = 0; r < m; ++r) {
      c.packed.run(x.data() + r * s.k, s.k, 1, one.data(), s.n, nullptr);
      ASSERT_EQ(first_diff(one.data(), batch.data() + r * s.n, s.n), -1)
          << "row " << r << " isa=" << to_string(isa);
    }
  }
}

}  // namespace
}  // namespace detinfer::kernels
