// The quantized linear (q8_0, quantized spec v1) against the bf16 PackedLinear at the
// Qwen2.5-0.5B shapes, one thread, M = 1 (decode) and 16 (batched decode / prefill). Each
// iteration runs both on the same input back to back, so the ratio q8_0 / bf16 is a
// same-run ratio (the counters bf16_ms, q8_ms and q8_over_bf16 are per call; the weights
// rotate over copies of ~256 MiB per format, so they come from DRAM as in a real model).
// BM_QuantFormatVsQ8 does the same for another format (F = QuantFormat number) against
// q8_0 (counters q8_ms, fmt_ms, fmt_over_q8, and the packed bytes per weight).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "detinfer/philox.h"
#include "kernels/kernels.h"

namespace detinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::PackedLinear;

std::vector<float> random_floats(std::int64_t n, std::uint64_t stream) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] =
        uniform01(philox_block(7, stream, static_cast<std::uint64_t>(i))[0]) * 2.0f - 1.0f;
  return v;
}

// args: N, K, M.
void BM_Q8VsBf16Linear(benchmark::State& state) {
  const std::int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const std::vector<float> w = random_floats(n * k, 1);
  std::vector<std::uint16_t> wb(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) wb[i] = kernels::f32_to_bf16_rne(w[i]);
  std::vector<std::uint8_t> wq(
      static_cast<std::size_t>(n * kernels::quant_row_bytes(kernels::QuantFormat::kQ8_0, k)));
  kernels::quantize_rows(kernels::QuantFormat::kQ8_0, w.data(), n, k, wq.data());
  const std::int64_t copies = std::max<std::int64_t>(1, (std::int64_t{256} << 20) / (n * k * 2));
  std::vector<PackedLinear> bf, q8;
  for (std::int64_t c = 0; c < copies; ++c) {
    bf.push_back(PackedLinear::pack(wb.data(), core::DType::kBF16, n, k));
    q8.push_back(PackedLinear::pack_quantized(wq.data(), kernels::QuantFormat::kQ8_0, n, k));
  }
  const std::vector<float> x = random_floats(m * k, 2);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  double t_bf = 0, t_q8 = 0;
  std::int64_t calls = 0, next = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    bf[static_cast<std::size_t>(next)].run(x.data(), k, m, y.data(), n, nullptr);
    const auto t1 = Clock::now();
    q8[static_cast<std::size_t>(next)].run(x.data(), k, m, y.data(), n, nullptr);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(y.data());
    t_bf += std::chrono::duration<double, std::milli>(t1 - t0).count();
    t_q8 += std::chrono::duration<double, std::milli>(t2 - t1).count();
    ++calls;
    next = (next + 1) % copies;
  }
  state.counters["bf16_ms"] = t_bf / static_cast<double>(calls);
  state.counters["q8_ms"] = t_q8 / static_cast<double>(calls);
  state.counters["q8_over_bf16"] = t_q8 / t_bf;
  state.SetLabel(kernels::to_string(kernels::active_isa()));
}

// args: N, K, M, F (a kernels::QuantFormat number).
void BM_QuantFormatVsQ8(benchmark::State& state) {
  const std::int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const auto f = static_cast<kernels::QuantFormat>(state.range(3));
  const std::vector<float> w = random_floats(n * k, 1);
  auto quantized = [&](kernels::QuantFormat q) {
    std::vector<std::uint8_t> b(static_cast<std::size_t>(n * kernels::quant_row_bytes(q, k)));
    kernels::quantize_rows(q, w.data(), n, k, b.data());
    return b;
  };
  const std::vector<std::uint8_t> w8 = quantized(kernels::QuantFormat::kQ8_0), wf = quantized(f);
  const std::int64_t copies = std::max<std::int64_t>(1, (std::int64_t{256} << 20) / (n * k * 2));
  std::vector<PackedLinear> q8, qf;
  for (std::int64_t c = 0; c < copies; ++c) {
    q8.push_back(PackedLinear::pack_quantized(w8.data(), kernels::QuantFormat::kQ8_0, n, k));
    qf.push_back(PackedLinear::pack_quantized(wf.data(), f, n, k));
  }
  const std::vector<float> x = random_floats(m * k, 2);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  double t8 = 0, tf = 0;
  std::int64_t calls = 0, next = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    q8[static_cast<std::size_t>(next)].run(x.data(), k, m, y.data(), n, nullptr);
    const auto t1 = Clock::now();
    qf[static_cast<std::size_t>(next)].run(x.data(), k, m, y.data(), n, nullptr);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(y.data());
    t8 += std::chrono::duration<double, std::milli>(t1 - t0).count();
    tf += std::chrono::duration<double, std::milli>(t2 - t1).count();
    ++calls;
    next = (next + 1) % copies;
  }
  state.counters["q8_ms"] = t8 / static_cast<double>(calls);
  state.counters["fmt_ms"] = tf / static_cast<double>(calls);
  state.counters["fmt_over_q8"] = tf / t8;
  state.counters["packed_bytes_per_weight"] =
      static_cast<double>(qf[0].packed_bytes()) / static_cast<double>(n * k);
  state.SetLabel(std::string(kernels::to_string(f)) + " " +
                 kernels::to_string(kernels::active_isa()));
}

}  // namespace

BENCHMARK(BM_QuantFormatVsQ8)
    ->ArgNames({"N", "K", "M", "F"})
    ->ArgsProduct({{4864}, {1024}, {1, 16}, {1, 3, 7, 9}})  // q4_0, q4_1, q4_k, q6_k
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_Q8VsBf16Linear)
    ->ArgNames({"N", "K", "M"})
    ->Args({896, 896, 1})
    ->Args({4864, 896, 1})
    ->Args({896, 4864, 1})
    ->Args({896, 896, 16})
    ->Args({4864, 896, 16})
    ->Args({896, 4864, 16})
    ->Unit(benchmark::kMillisecond);

}  // namespace detinfer::bench

BENCHMARK_MAIN();
