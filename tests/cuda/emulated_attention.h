// The attention kernels' emulation helpers (cuda_emulation_test.cpp,
// cuda_split_mask_emulation_test.cpp): a paged KV cache in a permuted pool and the
// launchers' launch shapes for the canonical and the split kernel, on the CPU; bitwise
// comparison of results.
//
// Include after cuda/cuda_emulator.h (it defines the CUDA keywords the kernels need).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/attention_kernels.cuh"

namespace detinfer::kernels::cuda::test {

template <typename T>
::testing::AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure()
             << "first difference at " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

struct Cache {
  std::vector<float> k, v;
  std::vector<std::int32_t> table;
  PagedKvView view;
};

// Logical K/V of `tokens` tokens placed in a randomly permuted paged pool (two spare
// blocks, filled with 1e30 / -1e30).
inline Cache make_cache(std::int64_t tokens, std::int64_t kv_heads, std::int64_t d, std::int64_t bs,
                        std::uint64_t layout_seed) {
  Cache c;
  const std::int64_t blocks = (tokens + bs - 1) / bs, pool = blocks + 2, stride = kv_heads * d;
  std::vector<std::int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = pool - 1; i > 0; --i)
    std::swap(perm[i], perm[random_index(layout_seed, i, i + 1)]);
  c.table.assign(perm.begin(), perm.begin() + blocks);
  c.k.assign(pool * bs * stride, 1e30f);
  c.v.assign(pool * bs * stride, -1e30f);
  const std::vector<float> lk = random_floats(tokens * stride, 60, -2.0f, 2.0f);
  const std::vector<float> lv = random_floats(tokens * stride, 61, -2.0f, 2.0f);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t at = (c.table[t / bs] * bs + t % bs) * stride;
    std::copy_n(&lk[t * stride], stride, &c.k[at]);
    std::copy_n(&lv[t * stride], stride, &c.v[at]);
  }
  c.view = PagedKvView{c.k.data(), c.v.data(), c.table.data(), blocks, bs, kv_heads, d};
  return c;
}

inline unsigned attention_threads(std::int64_t d) {  // as attention.cu
  return static_cast<unsigned>(std::max<std::int64_t>(64, (d + 31) / 32 * 32));
}

// Every row's attention (scale 0.125) by the canonical kernel, or by the split and combine
// kernels as attention_split_masked launches them; window and softcap as AttentionArgs.
inline std::vector<float> run_attention(bool split, const Cache& c, std::int64_t heads,
                                        const std::vector<std::int64_t>& keys,
                                        const std::vector<float>& q, unsigned threads,
                                        std::int64_t window = 0, float softcap = 0.0f) {
  const auto rows = static_cast<std::int64_t>(keys.size());
  const std::int64_t d = c.view.head_dim, ld = heads * d;
  std::vector<float> out(rows * ld, -3.0f);
  AttentionArgs a{q.data(), ld, keys.data(), heads, c.view, 0.125f, out.data(), ld};
  a.window = window;
  a.softcap = softcap;
  const auto blocks = static_cast<unsigned>(rows * heads);
  if (split) {
    const std::int64_t max_keys = *std::max_element(keys.begin(), keys.end());
    const std::int64_t splits =
        std::max<std::int64_t>(1, (max_keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys);
    // NaN: the combine kernel must read only the records the split kernel wrote.
    std::vector<float> ws(rows * heads * splits * (d + 2), std::numeric_limits<float>::quiet_NaN());
    emu::launch(dim3(blocks, static_cast<unsigned>(splits)), dim3(threads), 0,
                attention_split_kernel, a, ws.data(), splits);
    emu::launch(dim3(blocks), dim3(threads), 0, attention_combine_kernel, a,
                static_cast<const float*>(ws.data()), splits);
  } else {
    emu::launch(dim3(blocks), dim3(threads), 0, attention_kernel, a);
  }
  return out;
}

}  // namespace detinfer::kernels::cuda::test
