// The consistency experiment as a measurement: distinct outputs of one greedy request
// repeated amid random background traffic, canonical vs fast mode (docs/performance.md).
// Canonical mode's count is also asserted to be 1 by SessionConsistency; fast mode's
// count depends on libtorch and the machine, so it is reported here, not asserted.
//   bench_consistency [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include "detinfer/error.h"
#include "session/consistency_workload.h"

namespace detinfer {
namespace {

// range(0): 0 = canonical, 1 = fast. 40 runs of 16 tokens (libtorch's per-op overhead
// makes fast mode slow on the tiny model).
void BM_DistinctOutputsAmidTraffic(benchmark::State& state) {
  const NumericsMode mode = state.range(0) == 0 ? NumericsMode::kCanonical : NumericsMode::kFast;
  constexpr int kRuns = 40;
  std::size_t distinct = 0;
  for (auto _ : state) {
    try {
      distinct = testing::distinct_outputs(mode, kRuns, 16);
    } catch (const Error& e) {
      state.SkipWithError(e.what());  // fast mode needs libtorch
      return;
    }
  }
  state.counters["distinct_outputs"] = static_cast<double>(distinct);
  state.counters["runs"] = kRuns;
  state.SetLabel(mode == NumericsMode::kCanonical ? "canonical" : "fast");
}
BENCHMARK(BM_DistinctOutputsAmidTraffic)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace detinfer

BENCHMARK_MAIN();
