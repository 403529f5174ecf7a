// Attention over 16-bit K/V storage (PagedKvView::kv_dtype bf16 / f16, docs/numerics.md
// "KV storage"): the pools hold 2-byte bit patterns that every reader widens exactly. For
// every ISA and thread counts {1, 2, 3, 8}, GQA ratios 1/2/7, head dims that are and are
// not multiples of 16, key counts around the 16-lane blocks, the 64-key chunks and the
// thread split, block sizes 1..64 and 8192 keys, the result equals, bit for bit:
//   - the reference reading the 16-bit pools, and
//   - the reference over f32 pools holding the same values widened (the storage the pool
//     had before 16-bit storage: rounded with round_to_dtype into f32 slots),
// including f16 subnormals, infinities (f16 overflow) and NaNs in the stored values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "detinfer/error.h"
#include "isa_test_util.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"
#include "linear_test_util.h"

namespace detinfer::kernels {
namespace {

using testing::available_isas;
using testing::first_mismatch;
using testing::IsaGuard;
using testing::pool_for;
using testing::random_floats;

constexpr int kThreadCounts[] = {1, 2, 3, 8};

// `tokens` tokens of K/V in blocks of `block` tokens placed in reverse order, stored as
// `dtype` (half: 2-byte patterns) and, for comparison, widened into f32 pools (wide).
struct HalfCache {
  core::DType dtype;
  std::int64_t kv_heads, d, block;
  std::vector<std::uint16_t> k, v;  // as stored
  std::vector<float> wk, wv;        // the same values widened exactly
  std::vector<std::int32_t> table;

  HalfCache(core::DType dt, std::int64_t tokens, std::int64_t kvh, std::int64_t dim,
            std::uint64_t stream, std::int64_t block_size, float kscale = 2.0f, float vscale = 1.0f)
      : dtype(dt), kv_heads(kvh), d(dim), block(block_size) {
    const std::int64_t blocks = (tokens + block - 1) / block, w = kvh * dim;
    for (std::int64_t b = 0; b < blocks; ++b)
      table.push_back(static_cast<std::int32_t>(blocks - 1 - b));
    const std::vector<float> kr = random_floats(tokens * w, stream, kscale);
    const std::vector<float> vr = random_floats(tokens * w, stream + 1, vscale);
    // Poison (+inf) in unused slots: a kernel that reads them changes the result.
    const std::uint16_t inf = dt == core::DType::kBF16 ? 0x7f80u : 0x7c00u;
    k.assign(static_cast<std::size_t>(blocks * block * w), inf);
    v = k;
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t off = (table[t / block] * block + t % block) * w;
      store_as_dtype(&kr[t * w], &k[off], w, dt);
      store_as_dtype(&vr[t * w], &v[off], w, dt);
    }
    wk.resize(k.size());
    wv.resize(v.size());
    for (std::size_t i = 0; i < k.size(); ++i) {
      wk[i] = widen(k[i]);
      wv[i] = widen(v[i]);
    }
  }
  float widen(std::uint16_t h) const {
    return dtype == core::DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  void set_k(std::int64_t t, std::int64_t h, std::int64_t c, std::uint16_t bits) {
    const std::size_t i =
        static_cast<std::size_t>((table[t / block] * block + t % block) * kv_heads * d + h * d + c);
    k[i] = bits;
    wk[i] = widen(bits);
  }
  PagedKvView view() const {
    return PagedKvView{
        k.data(), v.data(), table.data(), static_cast<std::int64_t>(table.size()), block,
        kv_heads, d,        dtype};
  }
  PagedKvView wide_view() const {
    return PagedKvView{
        wk.data(), wv.data(), table.data(), static_cast<std::int64_t>(table.size()), block,
        kv_heads,  d};
  }
};

// The last `rows` positions of the sequence (causal key counts), every ISA and thread
// count, against both references.
void expect_reference(const HalfCache& cache, std::int64_t tokens, std::int64_t heads,
                      std::int64_t rows, const std::string& what) {
  const std::int64_t d = cache.d, ldq = heads * d + 3;
  const std::vector<float> q = random_floats(rows * ldq, 7 + tokens + heads + d, 2.0f);
  std::vector<std::int64_t> nk(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) nk[r] = tokens - rows + 1 + r;
  std::vector<float> want(static_cast<std::size_t>(rows * ldq), -3.0f);
  ref::attention(q.data(), ldq, rows, nk.data(), heads, cache.wide_view(), 0.125f, want.data(),
                 ldq);
  std::vector<float> ref16(want.size(), -3.0f);
  ref::attention(q.data(), ldq, rows, nk.data(), heads, cache.view(), 0.125f, ref16.data(), ldq);
  ASSERT_EQ(first_mismatch(ref16.data(), want.data(), rows * ldq), -1) << what << " reference";
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (int t : kThreadCounts) {
      std::vector<float> got(want.size(), -3.0f);
      attention(q.data(), ldq, rows, nk.data(), heads, cache.view(), 0.125f, got.data(), ldq,
                pool_for(t));
      ASSERT_EQ(first_mismatch(got.data(), want.data(), rows * ldq), -1)
          << what << " isa=" << to_string(isa) << " threads=" << t;
    }
  }
}

std::string name(core::DType dt) { return std::string(to_string(dt)) + " "; }

TEST(AttentionKv16, GroupsHeadDimsKeyCounts) {
  IsaGuard guard;
  std::uint64_t stream = 300;
  for (core::DType dt : {core::DType::kBF16, core::DType::kF16}) {
    for (std::int64_t group : {1, 2, 7}) {
      for (std::int64_t d : {8, 24, 64, 128}) {
        for (std::int64_t tokens : {1, 15, 16, 17, 63, 64, 65, 129}) {
          const HalfCache cache(dt, tokens, 2, d, stream += 2, 16);
          expect_reference(cache, tokens, 2 * group, tokens < 3 ? tokens : 3,
                           name(dt) + "group=" + std::to_string(group) + " d=" + std::to_string(d) +
                               " tokens=" + std::to_string(tokens));
        }
      }
    }
  }
}

// Chunk ranges split over threads (from 256 keys for 2 kv heads), every block size.
TEST(AttentionKv16, ChunkSplitsAndBlockSizes) {
  IsaGuard guard;
  std::uint64_t stream = 600;
  for (core::DType dt : {core::DType::kBF16, core::DType::kF16}) {
    for (std::int64_t group : {1, 2, 7}) {
      for (std::int64_t block : {1, 5, 16, 64}) {
        for (std::int64_t tokens : {191, 192, 193, 256, 257}) {
          const HalfCache cache(dt, tokens, 2, 64, stream += 2, block);
          const std::string what = name(dt) + "group=" + std::to_string(group) +
                                   " block=" + std::to_string(block) +
                                   " tokens=" + std::to_string(tokens);
          expect_reference(cache, tokens, 2 * group, 1, what + " rows=1");
          expect_reference(cache, tokens, 2 * group, 3, what + " rows=3");
        }
      }
    }
  }
}

TEST(AttentionKv16, LongContext8192Keys) {
  IsaGuard guard;
  for (core::DType dt : {core::DType::kBF16, core::DType::kF16}) {
    for (std::int64_t group : {1, 7}) {
      const HalfCache cache(dt, 8192, 2, 64, 7100 + group, 16);
      expect_reference(cache, 8192, 2 * group, 1, name(dt) + "8192 group=" + std::to_string(group));
    }
  }
}

// f16 subnormals (V scaled into [-2^-15, 2^-15]), f16 overflow to +-inf (K scaled past
// 65504), and NaN / inf patterns written into K: the widening is exact for all of them.
TEST(AttentionKv16, SubnormalsInfinitiesAndNaNs) {
  IsaGuard guard;
  const HalfCache sub(core::DType::kF16, 70, 2, 64, 8000, 16, 2.0f, 0x1p-15f);
  expect_reference(sub, 70, 4, 2, "f16 subnormal V");
  const HalfCache big(core::DType::kF16, 70, 2, 64, 8002, 16, 1e5f);
  expect_reference(big, 70, 4, 2, "f16 infinite K");
  for (core::DType dt : {core::DType::kBF16, core::DType::kF16}) {
    const std::uint16_t nan = dt == core::DType::kBF16 ? 0x7fc1u : 0x7e01u;
    const std::uint16_t ninf = dt == core::DType::kBF16 ? 0xff80u : 0xfc00u;
    HalfCache cache(dt, 130, 2, 64, 8010, 16);
    cache.set_k(5, 0, 3, ninf);  // a -inf score: weight 0
    cache.set_k(70, 1, 9, nan);  // a NaN score of kv head 1's heads
    cache.set_k(129, 0, 0, ninf);
    expect_reference(cache, 130, 14, 3, name(dt) + "non-finite K");
  }
}

TEST(AttentionKv16, BadDtypeIsAnError) {
  const HalfCache cache(core::DType::kBF16, 16, 1, 8, 9000, 16);
  PagedKvView bad = cache.view();
  bad.kv_dtype = static_cast<core::DType>(5);
  std::vector<float> q(8, 1.0f), out(8);
  const std::int64_t nk = 16;
  try {
    attention(q.data(), 8, 1, &nk, 1, bad, 0.125f, out.data(), 8, nullptr);
    FAIL() << "kv_dtype 5 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("kv_dtype"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace detinfer::kernels
