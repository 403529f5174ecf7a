// Paged-KV attention dispatch: threads split (row, kv head) pairs; each pair is one
// call of the ISA kernel, which computes every query head of that kv head's group.
#include <algorithm>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"

namespace detinfer::kernels {

void attention(const float* q, std::int64_t ldq, std::int64_t rows, const std::int64_t* num_keys,
               std::int64_t num_heads, const PagedKvView& kv, float scale, float* out,
               std::int64_t ldo, ThreadPool* pool) {
  if (rows <= 0) return;
  if (kv.num_kv_heads <= 0 || kv.head_dim <= 0 || kv.block_size <= 0 || num_heads <= 0 ||
      num_heads % kv.num_kv_heads != 0)
    fail(ErrorCode::kInvalidArgument, "attention: num_heads=", num_heads,
         " num_kv_heads=", kv.num_kv_heads, " head_dim=", kv.head_dim,
         " block_size=", kv.block_size);
  std::int64_t max_keys = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (num_keys[r] < 0 || num_keys[r] > kv.num_blocks * kv.block_size)
      fail(ErrorCode::kInvalidArgument, "attention: row ", r, " has ", num_keys[r],
           " keys but the block table covers ", kv.num_blocks * kv.block_size);
    max_keys = std::max(max_keys, num_keys[r]);
  }
  const std::int64_t group = num_heads / kv.num_kv_heads;
  const std::int64_t d = kv.head_dim;
  const cpu::AttentionFn fn = cpu::active_kernels().attention;
  // Row offsets of tokens 0..max_keys-1, shared by every row and head (no divisions in
  // the kernels' inner loops).
  const std::int64_t kv_stride = kv.num_kv_heads * d;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(max_keys));
  for (std::int64_t b = 0, t = 0; t < max_keys; ++b) {
    const std::int64_t block = kv.block_table[b];
    if (block < 0) fail(ErrorCode::kInvalidArgument, "attention: block_table[", b, "] = ", block);
    const std::int64_t end = std::min(max_keys, t + kv.block_size);
    for (std::int64_t row = block * kv.block_size; t < end; ++t, ++row)
      offsets[static_cast<std::size_t>(t)] = row * kv_stride;
  }
  // Tasks: (row, kv head, part of the kv head's query heads). Splitting a group's heads
  // re-reads its K/V but lets decode (one row) use more threads than kv heads.
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  const std::int64_t pairs = rows * kv.num_kv_heads;
  const std::int64_t splits = std::max<std::int64_t>(1, std::min(group, threads / pairs));
  auto body = [&](std::int64_t t0, std::int64_t t1) {
    // Uninitialized: the kernel writes every scratch float before reading it.
    const std::unique_ptr<float[]> scratch(
        new float[static_cast<std::size_t>(cpu::attention_scratch_floats(max_keys, d, group))]);
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t pair = t / splits, part = t % splits;
      const std::int64_t r = pair / kv.num_kv_heads;
      const std::int64_t h = pair % kv.num_kv_heads;
      const std::int64_t g0 = group * part / splits, g1 = group * (part + 1) / splits;
      const std::int64_t head = h * group + g0;
      fn(q + r * ldq + head * d, g1 - g0, num_keys[r], h, kv, offsets.data(), scale,
         out + r * ldo + head * d, scratch.get());
    }
  };
  const std::int64_t tasks = pairs * splits;
  if (pool != nullptr && tasks > 1) {
    pool->parallel_for(tasks, 1, body);
  } else {
    body(0, tasks);
  }
}

}  // namespace detinfer::kernels
