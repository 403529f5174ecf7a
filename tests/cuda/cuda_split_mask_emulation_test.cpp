// The device-invariant split attention with kernels::AttentionMask's sliding window and
// soft-cap (issue 29), its own code run on the CPU by tests/cuda/cuda_emulator.h: close to
// the reference's masked attention for windows inside one split, across one and two
// split boundaries and wider than every row, with and without soft-capping; the same
// bits for a row alone, in a batch, in another block layout and thread count; and blocks
// wholly before a row's window are never read (they hold NaN here, as a released block's
// -1 table entry would be out of bounds). The workspace starts as NaN, so a combine that
// read a split the split kernel skipped would show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda/cuda_emulator.h"  // first: defines the CUDA keywords for the kernels
#include "cuda/cuda_test_util.h"
#include "cuda/emulated_attention.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cuda {
namespace {

using test::Cache;
using test::make_cache;
using test::random_floats;
using test::run_attention;
using test::same_bits;

// A copy of `c` whose table entries for the blocks wholly before key `first` name a spare
// block of NaN (the kernels must not read them).
Cache with_dead_blocks(const Cache& c, std::int64_t first) {
  Cache h = c;
  const std::int64_t bs = c.view.block_size, stride = c.view.num_kv_heads * c.view.head_dim;
  std::int32_t spare = 0;
  while (std::find(h.table.begin(), h.table.end(), spare) != h.table.end()) ++spare;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fill_n(h.k.begin() + spare * bs * stride, bs * stride, nan);
  std::fill_n(h.v.begin() + spare * bs * stride, bs * stride, nan);
  for (std::int64_t b = 0; b < first / bs; ++b) h.table[b] = spare;
  h.view.k_pool = h.k.data();
  h.view.v_pool = h.v.data();
  h.view.block_table = h.table.data();
  return h;
}

std::vector<float> reference(const Cache& c, std::int64_t heads,
                             const std::vector<std::int64_t>& keys, const std::vector<float>& q,
                             std::int64_t window, float softcap) {
  const auto rows = static_cast<std::int64_t>(keys.size());
  const std::int64_t ld = heads * c.view.head_dim;
  std::vector<std::int64_t> first(keys.size());
  for (std::size_t r = 0; r < keys.size(); ++r)
    first[r] = window > 0 ? std::max<std::int64_t>(0, keys[r] - window) : 0;
  std::vector<float> want(rows * ld);
  ref::attention_masked(q.data(), ld, rows, keys.data(), AttentionMask{first.data(), softcap},
                        heads, c.view, 0.125f, want.data(), ld);
  return want;
}

TEST(CudaSplitAttentionMask, WindowAndSoftcapFollowTheCanonicalRule) {
  const std::int64_t heads = 2, kv_heads = 1, d = 64, tokens = 700;
  const Cache c16 = make_cache(tokens, kv_heads, d, 16, 80);
  const Cache c5 = make_cache(tokens, kv_heads, d, 5, 81);
  // Rows before, at and past the split boundaries (256, 512).
  const std::vector<std::int64_t> keys = {1, 7, 256, 257, 300, 513, 600, 700};
  const std::vector<float> q = random_floats(keys.size() * heads * d, 82);
  // Scores here have a spread of about 1.3: a cap of 1.5 changes them a lot.
  for (const float cap : {0.0f, 1.5f}) {
    for (const std::int64_t window : {5, 64, 300, 1000}) {
      const std::vector<float> batch = run_attention(true, c16, heads, keys, q, 64, window, cap);
      const std::vector<float> want = reference(c16, heads, keys, q, window, cap);
      const std::vector<float> unmasked = reference(c16, heads, keys, q, 0, 0.0f);
      double moved = 0;  // how far the mask moves the output: the check below can see it
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(batch[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
            << "window " << window << " cap " << cap << " output " << i;
        moved = std::max(moved, std::fabs(static_cast<double>(want[i]) - unmasked[i]));
      }
      if (cap > 0.0f || window < tokens) {
        EXPECT_GT(moved, 1e-2) << window << " " << cap;
      }
      for (std::size_t r = 0; r < keys.size(); ++r) {
        const std::vector<float> qr(q.begin() + r * heads * d, q.begin() + (r + 1) * heads * d);
        const std::vector<float> wr(batch.begin() + r * heads * d,
                                    batch.begin() + (r + 1) * heads * d);
        const std::vector<std::int64_t> one = {keys[r]};
        EXPECT_TRUE(same_bits(run_attention(true, c16, heads, one, qr, 128, window, cap), wr)) << r;
        EXPECT_TRUE(same_bits(run_attention(true, c5, heads, one, qr, 64, window, cap), wr)) << r;
        const std::int64_t first = std::max<std::int64_t>(0, keys[r] - window);
        const Cache dead = with_dead_blocks(c5, first);
        EXPECT_TRUE(same_bits(run_attention(true, dead, heads, one, qr, 64, window, cap), wr))
            << "row " << r << " read a block before its window " << window;
        // The canonical kernel skips them too (folded from the first visible key).
        EXPECT_TRUE(same_bits(run_attention(false, dead, heads, one, qr, 64, window, cap),
                              run_attention(false, c5, heads, one, qr, 64, window, cap)))
            << r;
      }
    }
  }
}

}  // namespace
}  // namespace detinfer::kernels::cuda
