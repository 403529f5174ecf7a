// Prefill attention: one prefill chunk of 256 query rows at the end of a `keys`-token
// sequence (row i sees keys - 255 + i keys, as the engine's chunked prefill does), the
// Qwen2.5-0.5B attention shape (14 query heads, 2 kv heads, head_dim 64, blocks of 16),
// bf16 KV, hot. Reports the kernel's multiply-adds per second (per key and query head:
// 2 * head_dim, the score's dot product and the numerator's column fmas), to compare with
// bench_kernels' BM_FmaPeak run next to it (docs/performance.md, "Prefill attention").
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "detinfer/philox.h"
#include "kernels/kernels.h"

namespace {

using namespace detinfer;

std::vector<float> random_floats(std::size_t n, std::uint64_t stream) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = philox_uniform(42, stream, i, 0) * 2.0f - 1.0f;
  return v;
}

core::ThreadPool* pool_for(int threads) {
  static core::ThreadPool two(2);
  return threads == 2 ? &two : nullptr;
}

constexpr std::int64_t kRows = 256, kHeads = 14, kKvHeads = 2, kDim = 64, kBlock = 16;

void BM_PrefillAttention(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::int64_t keys = state.range(1);
  const std::size_t n = static_cast<std::size_t>(keys * kKvHeads * kDim);
  std::vector<std::uint16_t> k(n), v(n);
  kernels::store_as_dtype(random_floats(n, 1).data(), k.data(), static_cast<std::int64_t>(n),
                          core::DType::kBF16);
  kernels::store_as_dtype(random_floats(n, 2).data(), v.data(), static_cast<std::int64_t>(n),
                          core::DType::kBF16);
  std::vector<std::int32_t> table;
  for (std::int64_t b = 0; b < keys / kBlock; ++b) table.push_back(static_cast<std::int32_t>(b));
  kernels::PagedKvView kv{k.data(), v.data(), table.data(), static_cast<std::int64_t>(table.size()),
                          kBlock,   kKvHeads, kDim};
  kv.kv_dtype = core::DType::kBF16;
  const std::int64_t ld = kHeads * kDim;
  const std::vector<float> q = random_floats(static_cast<std::size_t>(kRows * ld), 3);
  std::vector<float> out(q.size());
  std::vector<std::int64_t> nk(kRows);
  double macs = 0;
  for (std::int64_t i = 0; i < kRows; ++i) {
    nk[static_cast<std::size_t>(i)] = keys - kRows + 1 + i;
    macs += static_cast<double>(nk[static_cast<std::size_t>(i)]) * kHeads * 2 * kDim;
  }
  for (auto _ : state) {
    kernels::attention(q.data(), ld, kRows, nk.data(), kHeads, kv, 0.125f, out.data(), ld,
                       pool_for(threads));
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GMAC_per_s"] =
      benchmark::Counter(macs * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_PrefillAttention)
    ->ArgNames({"threads", "keys"})
    ->ArgsProduct({{1, 2}, {512, 4096, 8192}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_MAIN();
