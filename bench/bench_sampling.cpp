// Per-token sampling cost at Qwen2's vocabulary (151,936): decode::choose_token for
// greedy, top_k, top_p and min_p on one logits row, as the engine calls it once per
// token per sequence (with the engine's reused SamplingWorkspace) (docs/performance.md,
// "Sampling"). Two rows: "peaked" (N(0, 2) logits with 8 tokens raised by 12, most of the mass on a
// few tokens, like a confident model) and "spread" (N(0, 1) logits: the nucleus holds most of the
// vocabulary, the worst case of any selection that sorts what it keeps). The counter `kept` is the
// candidate count after the warpers. Compare each mode with greedy of the same run.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "decode/sampler.h"
#include "detinfer/philox.h"

namespace detinfer::bench {
namespace {

constexpr std::int64_t kVocab = 151936;

std::vector<float> logits_row(bool peaked) {
  std::vector<float> v(kVocab);
  for (std::int64_t i = 0; i < kVocab; ++i) {
    const auto step = static_cast<std::uint64_t>(i);
    const float u = philox_uniform(5, 0, step, 0);
    // Box-Muller (benchmark data only).
    const float g = std::sqrt(-2.0f * std::log(u > 1e-30f ? u : 1e-30f)) *
                    std::cos(6.2831853f * philox_uniform(5, 0, step, 1));
    v[static_cast<std::size_t>(i)] = peaked ? 2.0f * g + (i % 18992 == 7 ? 12.0f : 0.0f) : g;
  }
  return v;
}

enum Mode : int { kGreedy, kTopK, kTopP, kMinP };

GenerationConfig config_of(int mode) {
  GenerationConfig c;
  c.temperature = 1.0f;
  switch (mode) {
    case kGreedy:
      c.temperature = 0.0f;
      break;
    case kTopK:
      c.top_k = 50;
      break;
    case kTopP:
      c.top_p = 0.9f;
      break;
    default:
      c.min_p = 0.05f;
      break;
  }
  return c;
}

// Args: mode (greedy, top_k 50, top_p 0.9, min_p 0.05), row (1 peaked, 0 spread).
void BM_ChooseToken(benchmark::State& state) {
  const GenerationConfig c = config_of(static_cast<int>(state.range(0)));
  const std::vector<float> row = logits_row(state.range(1) != 0);
  const std::vector<std::int32_t> none;
  decode::SamplingWorkspace ws;
  std::uint64_t step = 0;
  for (auto _ : state) {
    const decode::TokenChoice t =
        decode::choose_token(c, row.data(), kVocab, none, none, 42, 0, step++, ws);
    benchmark::DoNotOptimize(t.token);
  }
  const double kept =
      c.temperature == 0.0f
          ? 1.0
          : static_cast<double>(decode::apply_warpers(c, row.data(), kVocab).size());
  state.counters["kept"] = kept;
}
BENCHMARK(BM_ChooseToken)
    ->ArgNames({"mode", "peaked"})
    ->ArgsProduct({{kGreedy, kTopK, kTopP, kMinP}, {1, 0}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace detinfer::bench

BENCHMARK_MAIN();
