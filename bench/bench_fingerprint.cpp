// Per-step digest cost vs a decode step. A decode step of Qwen2.5-0.5B runs 24 layers and
// then the lm_head (896 x 151936, bf16): the lm_head alone is a lower bound of the step
// time, so digest/lm_head is an upper bound of the digest's share of decode time.
// BM_DigestVsLmHead interleaves both in each iteration (these machines are noisy) and
// reports digest_pct = 100 * digest time / lm_head time.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "detinfer/fingerprint.h"
#include "detinfer/metrics.h"
#include "detinfer/philox.h"
#include "fingerprint/fingerprint_test_util.h"
#include "kernels/kernels.h"

namespace detinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kVocab = 151936;
constexpr std::int64_t kHidden = 896;

std::vector<float> logits_row() {
  std::vector<float> v(kVocab);
  for (std::int64_t i = 0; i < kVocab; ++i) {
    v[static_cast<std::size_t>(i)] =
        philox_uniform(3, 0, static_cast<std::uint64_t>(i), 0) * 20 - 10;
  }
  return v;
}

// bf16 weights from Philox (4 values per block), roughly N(0, 0.05)-sized.
const kernels::PackedLinear& lm_head() {
  static const kernels::PackedLinear packed = [] {
    std::vector<std::uint16_t> w(static_cast<std::size_t>(kVocab * kHidden));
    for (std::size_t i = 0; i < w.size(); i += 4) {
      const PhiloxCounter b = philox_block(11, 0, i / 4);
      for (std::size_t j = 0; j < 4 && i + j < w.size(); ++j) {
        const float f = (uniform01(b[j]) - 0.5f) * 0.1f;
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        w[i + j] = static_cast<std::uint16_t>(bits >> 16);
      }
    }
    return kernels::PackedLinear::pack(w.data(), core::DType::kBF16, kVocab, kHidden);
  }();
  return packed;
}

core::ThreadPool* pool_for(int threads) {
  static std::unique_ptr<core::ThreadPool> pools[17];
  if (threads <= 1) return nullptr;
  if (!pools[threads]) pools[threads] = std::make_unique<core::ThreadPool>(threads);
  return pools[threads].get();
}

void BM_LogitsDigest(benchmark::State& state) {
  const std::vector<float> row = logits_row();
  for (auto _ : state) {
    benchmark::DoNotOptimize(logits_digest(row.data(), row.size()));
  }
  state.SetBytesProcessed(state.iterations() * kVocab * 4);
}
BENCHMARK(BM_LogitsDigest);

void BM_LmHeadDecode(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const kernels::PackedLinear& w = lm_head();
  const std::vector<float> x(kHidden, 0.25f);
  std::vector<float> y(kVocab);
  for (auto _ : state) {
    w.run(x.data(), kHidden, 1, y.data(), kVocab, pool_for(threads));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * kVocab * kHidden * 2);
}
BENCHMARK(BM_LmHeadDecode)->Arg(1)->Arg(2)->UseRealTime();

void BM_DigestVsLmHead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const kernels::PackedLinear& w = lm_head();
  std::vector<float> x(kHidden);
  for (std::int64_t i = 0; i < kHidden; ++i)
    x[static_cast<std::size_t>(i)] = philox_uniform(5, 0, static_cast<std::uint64_t>(i), 0) - 0.5f;
  std::vector<float> y(kVocab);
  double linear_s = 0, digest_s = 0;
  std::uint64_t sink = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    w.run(x.data(), kHidden, 1, y.data(), kVocab, pool_for(threads));
    const auto t1 = Clock::now();
    sink ^= logits_digest(y.data(), y.size());  // the row just written: as in a real step
    const auto t2 = Clock::now();
    linear_s += std::chrono::duration<double>(t1 - t0).count();
    digest_s += std::chrono::duration<double>(t2 - t1).count();
  }
  benchmark::DoNotOptimize(sink);
  const double n = static_cast<double>(state.iterations());
  state.counters["lm_head_ms"] = 1e3 * linear_s / n;
  state.counters["digest_us"] = 1e6 * digest_s / n;
  state.counters["digest_pct"] = 100.0 * digest_s / linear_s;
}
BENCHMARK(BM_DigestVsLmHead)->Arg(1)->Arg(2)->UseRealTime()->MinTime(2.0);

void BM_FingerprintToJson(benchmark::State& state) {
  const RunFingerprint fp = testing::at_level(
      testing::make_fingerprint(1, 1, static_cast<int>(state.range(0))), RecordLevel::kSteps);
  for (auto _ : state) benchmark::DoNotOptimize(fp.to_json());
}
BENCHMARK(BM_FingerprintToJson)->Arg(64)->Arg(1024);

void BM_FingerprintFromJson(benchmark::State& state) {
  const std::string text =
      testing::at_level(testing::make_fingerprint(1, 1, static_cast<int>(state.range(0))),
                        RecordLevel::kSteps)
          .to_json();
  for (auto _ : state) benchmark::DoNotOptimize(RunFingerprint::from_json(text));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_FingerprintFromJson)->Arg(64)->Arg(1024);

void BM_MetricsUpdate(benchmark::State& state) {
  static MetricsRegistry registry;
  static SessionMetrics metrics(registry);
  for (auto _ : state) {
    metrics.generated_tokens.inc();
    metrics.inter_token_latency.observe(0.004);
  }
}
BENCHMARK(BM_MetricsUpdate)->ThreadRange(1, 2);

}  // namespace
}  // namespace detinfer::bench

BENCHMARK_MAIN();
