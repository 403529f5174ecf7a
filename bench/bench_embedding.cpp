// Where a tied model's embedding rows come from (docs/performance.md, "Memory footprint"):
// a row of the stored-dtype table (two copies of the weights: the table and the packed
// lm_head) against the same row read back from the packed lm_head's panels (one copy),
// for the Qwen2.5-0.5B shape (vocab 151936, hidden 896, bf16). A decode step embeds one
// row per sequence, so the cost per row is compared with the step, not with the table.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "detinfer/philox.h"
#include "kernels/kernels.h"
#include "model/weight_loader.h"

namespace {

using detinfer::kernels::PackedLinear;

constexpr std::int64_t kVocab = 151936, kHidden = 896;

struct Tables {
  std::vector<std::uint16_t> table;
  PackedLinear packed;
};

const Tables& tables() {
  static const Tables t = [] {
    Tables out;
    out.table.resize(static_cast<std::size_t>(kVocab * kHidden));
    for (std::size_t i = 0; i < out.table.size(); ++i)
      out.table[i] = static_cast<std::uint16_t>(detinfer::philox_bits(5, 0, i, 0) >> 16) & 0xbfffu;
    out.packed =
        PackedLinear::pack(out.table.data(), detinfer::core::DType::kBF16, kVocab, kHidden);
    return out;
  }();
  return t;
}

// state.range(0): 0 = the table row (widen_to_f32), 1 = the packed lm_head (widen_row).
void BM_EmbeddingRow(benchmark::State& state) {
  const Tables& t = tables();
  const bool packed = state.range(0) != 0;
  std::vector<float> x(kHidden);
  std::uint64_t i = 0;
  for (auto _ : state) {
    const auto token = static_cast<std::int64_t>(detinfer::philox_bits(9, 0, i++, 0) % kVocab);
    if (packed) {
      t.packed.widen_row(token, x.data());
    } else {
      detinfer::model::widen_to_f32(detinfer::core::DType::kBF16, t.table.data() + token * kHidden,
                                    kHidden, x.data());
    }
    benchmark::DoNotOptimize(x.data());
  }
}

}  // namespace

BENCHMARK(BM_EmbeddingRow)->ArgName("packed")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
