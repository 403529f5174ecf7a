// The quantized linear (q8_0, quantized spec v1) against the bf16 PackedLinear at the
// Qwen2.5-0.5B shapes, one thread, M = 1 (decode), 16 (batched decode) and 64 / 256 (prefill). Each
// iteration runs both on the same input back to back, so the ratio q8_0 / bf16 is a
// same-run ratio (the counters bf16_ms, q8_ms and q8_over_bf16 are per call; the weights
// rotate over copies of ~256 MiB per format, so they come from DRAM as in a real model).
// BM_QuantFormatVsQ8 does the same for another format (F = QuantFormat number) against
// q8_0 (counters q8_ms, fmt_ms, fmt_over_q8, and the packed bytes per weight), and
// BM_QuantFormatVsQ8Resident with one small copy (the arithmetic alone). BM_VnniPeak and
// BM_Avx2Int8Peak: the int8 product ceilings per core (VNNI, AVX2).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <ctime>
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

// The int8 ceiling of the quantized kernels: 24 independent chains of vpdpbusd (64
// multiply-adds of u8 x s8 each) on zmm8..zmm31, per thread CPU second; set against
// BM_FmaPeak (bench_kernels), the f32 linear's ceiling. In asm: GCC 12 copies each
// accumulator before the destructive instruction, which halves the rate.
__attribute__((target("avx512f,avx512vnni"))) void vnni_chains(std::int64_t iters) {
  asm volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n\tvpxord %%zmm1, %%zmm1, %%zmm1" ::: "xmm0", "xmm1");
  for (std::int64_t it = 0; it < iters; ++it) {
#define DETINFER_DP(i) "vpdpbusd %%zmm1, %%zmm0, %%zmm" #i "\n\t"
    asm volatile(DETINFER_DP(8) DETINFER_DP(9) DETINFER_DP(10) DETINFER_DP(11) DETINFER_DP(12)
                     DETINFER_DP(13) DETINFER_DP(14) DETINFER_DP(15) DETINFER_DP(16) DETINFER_DP(17)
                         DETINFER_DP(18) DETINFER_DP(19) DETINFER_DP(20) DETINFER_DP(21)
                             DETINFER_DP(22) DETINFER_DP(23) DETINFER_DP(24) DETINFER_DP(25)
                                 DETINFER_DP(26) DETINFER_DP(27) DETINFER_DP(28) DETINFER_DP(29)
                                     DETINFER_DP(30) DETINFER_DP(31)::
                                         : "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
                                           "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19",
                                           "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25",
                                           "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
#undef DETINFER_DP
  }
}

// Runs chains(iters) per iteration and reports cpu_GMACS: macs_per_iter multiply-adds per
// loop iteration of chains, per process CPU second (the int8 ceilings below).
void int8_peak(benchmark::State& state, void (*chains)(std::int64_t), double macs_per_iter) {
  constexpr std::int64_t kIters = 1 << 20;
  double cpu = 0;
  for (auto _ : state) {
    const auto c0 = std::clock();
    chains(kIters);
    cpu += static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  }
  state.counters["cpu_GMACS"] =
      macs_per_iter * kIters * static_cast<double>(state.iterations()) / cpu / 1e9;
}

void BM_VnniPeak(benchmark::State& state) {
  if (!kernels::isa_supported(kernels::Isa::kAvx512) || !__builtin_cpu_supports("avx512vnni")) {
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  int8_peak(state, vnni_chains, 64.0 * 24);
}

// The AVX2 int8 ceiling (Dot256, no VNNI): 6 independent chains of the int8 form's
// product, vpmaddubsw (32 u8 x s8 products, pairs summed in int16) + vpmaddwd (pairs into
// int32) + vpaddd, i.e. 32 multiply-adds, without the vpsignb / vpabsb the kernel also
// pays: what any AVX2 quantized kernel of spec v1's exact products can reach per core.
__attribute__((target("avx2"))) void avx2_int8_chains(std::int64_t iters) {
  asm volatile(
      "vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\t"
      "vpxor %%ymm15, %%ymm15, %%ymm15" ::
          : "xmm0", "xmm1", "xmm15");
  for (std::int64_t it = 0; it < iters; ++it) {
#define DETINFER_I8(t, a)                   \
  "vpmaddubsw %%ymm1, %%ymm0, %%ymm" #t     \
  "\n\t"                                    \
  "vpmaddwd %%ymm15, %%ymm" #t ", %%ymm" #t \
  "\n\t"                                    \
  "vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
    asm volatile(DETINFER_I8(2, 8) DETINFER_I8(3, 9) DETINFER_I8(4, 10) DETINFER_I8(5, 11)
                     DETINFER_I8(6, 12) DETINFER_I8(7, 13)::
                         : "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                           "xmm11", "xmm12", "xmm13");
#undef DETINFER_I8
  }
}

void BM_Avx2Int8Peak(benchmark::State& state) {
  if (!kernels::isa_supported(kernels::Isa::kAvx2)) {
    state.SkipWithError("no AVX2 on this CPU");
    return;
  }
  int8_peak(state, avx2_int8_chains, 32.0 * 6);
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
  // Multiply-adds per second of each (n k m per call), to set against BM_FmaPeak.
  const double macs = static_cast<double>(n * k * m) * static_cast<double>(calls);
  state.counters["bf16_gmacs"] = macs / t_bf * 1e-6;
  state.counters["q8_gmacs"] = macs / t_q8 * 1e-6;
  state.SetLabel(kernels::to_string(kernels::active_isa()));
}

// args: N, K, M, F (a kernels::QuantFormat number).
// resident: one copy of the weights (stays in cache when small: the kernels' arithmetic
// alone); else enough copies to pass 256 MiB (every call reads its weights from memory).
void quant_format_vs_q8(benchmark::State& state, bool resident) {
  const std::int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const auto f = static_cast<kernels::QuantFormat>(state.range(3));
  const std::vector<float> w = random_floats(n * k, 1);
  auto quantized = [&](kernels::QuantFormat q) {
    std::vector<std::uint8_t> b(static_cast<std::size_t>(n * kernels::quant_row_bytes(q, k)));
    kernels::quantize_rows(q, w.data(), n, k, b.data());
    return b;
  };
  const std::vector<std::uint8_t> w8 = quantized(kernels::QuantFormat::kQ8_0), wf = quantized(f);
  const std::int64_t copies =
      resident ? 1 : std::max<std::int64_t>(1, (std::int64_t{256} << 20) / (n * k * 2));
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

void BM_QuantFormatVsQ8(benchmark::State& state) { quant_format_vs_q8(state, false); }
void BM_QuantFormatVsQ8Resident(benchmark::State& state) { quant_format_vs_q8(state, true); }

}  // namespace

BENCHMARK(BM_VnniPeak)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Avx2Int8Peak)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_QuantFormatVsQ8)
    ->ArgNames({"N", "K", "M", "F"})
    ->ArgsProduct({{4864}, {1024}, {1, 2, 16}, {1, 2, 3, 7, 9}})  // q4_0, q5_0, q4_1, q4_k, q6_k
    ->Unit(benchmark::kMillisecond);

// The same with N 256 and one copy: weights and activations in L2 (q8_0: 272 KiB).
BENCHMARK(BM_QuantFormatVsQ8Resident)
    ->ArgNames({"N", "K", "M", "F"})
    ->ArgsProduct({{256}, {1024}, {1, 16}, {1, 2, 3, 7, 9}})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_Q8VsBf16Linear)
    ->ArgNames({"N", "K", "M"})
    ->Args({896, 896, 1})
    ->Args({4864, 896, 1})
    ->Args({896, 4864, 1})
    ->Args({896, 896, 16})
    ->Args({4864, 896, 16})
    ->Args({896, 4864, 16})
    ->Args({4864, 896, 64})  // prefill chunks
    ->Args({896, 4864, 64})
    ->Args({4864, 896, 256})
    ->Unit(benchmark::kMillisecond);

}  // namespace detinfer::bench

BENCHMARK_MAIN();
