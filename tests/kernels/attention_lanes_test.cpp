// The attention kernels' lane layouts (score lanes over keys, numerator lanes over head
// columns, 8- and 16-lane ISAs, chunk ranges split over threads) equal the reference bit for bit on
// the edges of every layout: GQA group sizes 1..16 (AVX-512 switches variants at 8, and scores
// full 16-key blocks with K tiles transposed in registers from 4 heads per pass, the other
// blocks and smaller groups through the transposed scratch), key counts
// around multiples of 16 and of the 64-key chunk, head dims that are not multiples of 16 or end
// in a chunk of fewer than 64 columns (96), every ISA
// and thread counts {1, 2, 3, 8}; and non-finite scores (NaN keys anywhere, infinities) give the
// reference's results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"
#include "linear_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::first_diff;
using testing::first_mismatch;
using testing::IsaGuard;
using testing::pool_for;
using testing::random_floats;

constexpr int kThreadCounts[] = {1, 2, 3, 8};

// K/V of `tokens` tokens in blocks of `block` tokens placed in reverse order (block b at
// physical block blocks-1-b), so consecutive keys cross scattered blocks.
struct Cache {
  std::int64_t kv_heads, d, block;
  std::vector<float> k, v;
  std::vector<std::int32_t> table;
  Cache(std::int64_t tokens, std::int64_t kvh, std::int64_t dim, std::uint64_t stream,
        std::int64_t block_size = 16)
      : kv_heads(kvh), d(dim), block(block_size) {
    const std::int64_t blocks = (tokens + block - 1) / block, w = kvh * dim;
    for (std::int64_t b = 0; b < blocks; ++b)
      table.push_back(static_cast<std::int32_t>(blocks - 1 - b));
    const std::vector<float> kr = random_floats(tokens * w, stream, 2.0f);
    const std::vector<float> vr = random_floats(tokens * w, stream + 1);
    k.assign(blocks * block * w, 1e30f);  // poison: unused slots must not be read
    v = k;
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t off = (table[t / block] * block + t % block) * w;
      std::memcpy(&k[off], &kr[t * w], w * sizeof(float));
      std::memcpy(&v[off], &vr[t * w], w * sizeof(float));
    }
  }
  float* k_at(std::int64_t t, std::int64_t h) {
    return &k[(table[t / block] * block + t % block) * kv_heads * d + h * d];
  }
  PagedKvView view() const {
    return PagedKvView{
        k.data(), v.data(), table.data(), static_cast<std::int64_t>(table.size()), block,
        kv_heads, d};
  }
};

// Runs the last `rows` positions of a `tokens`-token sequence (causal key counts) with
// every ISA and thread count and compares with the reference.
// With positive_q every query entry is positive, so a key whose K entries are all large
// and positive has the largest score of every head.
void expect_reference(Cache& cache, std::int64_t tokens, std::int64_t heads, std::int64_t rows,
                      float scale, const std::string& what, bool positive_q = false) {
  const std::int64_t d = cache.d, ldq = heads * d + 3;
  std::vector<float> q = random_floats(rows * ldq, 7 + tokens + heads + d, 2.0f);
  if (positive_q)
    for (float& x : q) x = std::fabs(x);
  std::vector<std::int64_t> nk(rows);
  for (std::int64_t r = 0; r < rows; ++r) nk[r] = tokens - rows + 1 + r;
  std::vector<float> want(rows * ldq, -3.0f);
  ref::attention(q.data(), ldq, rows, nk.data(), heads, cache.view(), scale, want.data(), ldq);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (int t : kThreadCounts) {
      std::vector<float> got(rows * ldq, -3.0f);
      attention(q.data(), ldq, rows, nk.data(), heads, cache.view(), scale, got.data(), ldq,
                pool_for(t));
      ASSERT_EQ(first_mismatch(got.data(), want.data(), rows * ldq), -1)
          << what << " isa=" << to_string(isa) << " threads=" << t;
    }
  }
}

TEST(AttentionLanes, EveryGroupSizeKeyCountAndHeadDim) {
  IsaGuard guard;
  std::uint64_t stream = 900;
  for (std::int64_t group : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}) {
    for (std::int64_t d : {8, 24, 64, 72, 96, 128}) {
      for (std::int64_t tokens : {1, 2, 15, 16, 17, 33, 63, 64, 65, 129}) {
        Cache cache(tokens, 2, d, stream += 2);
        // 3 rows: each row transposes its keys; 9 (or every row): K transposed once.
        for (std::int64_t rows :
             {std::min<std::int64_t>(tokens, 3), std::min<std::int64_t>(tokens, 9)})
          expect_reference(cache, tokens, 2 * group, rows, 0.125f,
                           "group=" + std::to_string(group) + " d=" + std::to_string(d) +
                               " tokens=" + std::to_string(tokens) +
                               " rows=" + std::to_string(rows));
      }
    }
  }
}

TEST(AttentionLanes, NonFiniteScoresMatchReference) {
  IsaGuard guard;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Poison {
    std::int64_t token;
    float value;
  };
  const std::vector<std::vector<Poison>> cases = {
      {{0, nan}},              // the first score NaN: every weight is NaN
      {{5, nan}},              // NaN elsewhere in lane 5 of the first block: skipped by max
      {{17, nan}, {40, nan}},  // NaNs in later blocks
      {{3, inf}},              // +inf score: max is +inf
      {{0, -inf}, {9, -inf}},  // -inf scores
      {{1, inf}, {2, -inf}, {20, nan}},
  };
  for (std::int64_t group : {1, 7, 12}) {
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const std::int64_t tokens = 70, d = 64;
      Cache cache(tokens, 2, d, 1000 + c);
      // A non-finite K entry makes that key's score non-finite (for every head of kv head 0).
      for (const Poison& p : cases[c]) cache.k_at(p.token, 0)[p.token % d] = p.value;
      // Key 21 (lane 5 of the second block of 16) gets the largest finite score of the
      // heads (about 4 against about +-1.3 for the others, so their weights still count).
      // A NaN score makes the whole head NaN (its weight enters the sums); -inf scores
      // get weight 0.
      for (std::int64_t i = 0; i < d; ++i) cache.k_at(21, 0)[i] = 0.5f;
      expect_reference(cache, tokens, 2 * group, 2, 0.125f,
                       "group=" + std::to_string(group) + " case=" + std::to_string(c), true);
    }
  }
}

// Key counts around the 64-key chunks and the split of chunk ranges over threads (rows
// fewer than the threads are split by keys from 1024 keys on, every kv head of a row in
// one task taking turns every 256 keys; parts end inside those turns), every block size,
// GQA ratios 1/2/7, and a NaN score at the first key of a later part.
TEST(AttentionLanes, ChunkRangesSplitOverThreadsAnyBlockSize) {
  IsaGuard guard;
  std::uint64_t stream = 5000;
  for (std::int64_t group : {1, 2, 7}) {
    for (std::int64_t block : {1, 5, 16, 64}) {
      for (std::int64_t tokens : {191, 1023, 1024, 1025, 1151, 1300, 1601}) {
        Cache cache(tokens, 2, 64, stream += 2, block);
        const std::string what = "group=" + std::to_string(group) +
                                 " block=" + std::to_string(block) +
                                 " tokens=" + std::to_string(tokens);
        expect_reference(cache, tokens, 2 * group, 1, 0.125f, what + " rows=1");
        expect_reference(cache, tokens, 2 * group, 3, 0.125f, what + " rows=3");
        expect_reference(cache, tokens, 2 * group, 17, 0.125f, what + " rows=17");
      }
    }
  }
  for (std::int64_t token : {0, 512, 576, 1024}) {
    Cache cache(1300, 2, 64, stream += 2, 16);
    cache.k_at(token, 0)[3] = std::numeric_limits<float>::quiet_NaN();
    expect_reference(cache, 1300, 14, 1, 0.125f, "NaN key " + std::to_string(token));
  }
}

TEST(AttentionLanes, LongContext8192Keys) {
  IsaGuard guard;
  for (std::int64_t group : {1, 7}) {
    Cache cache(8192, 2, 64, 7000 + group, 16);
    expect_reference(cache, 8192, 2 * group, 1, 0.125f, "8192 group=" + std::to_string(group));
  }
}

}  // namespace
}  // namespace detinfer::kernels
