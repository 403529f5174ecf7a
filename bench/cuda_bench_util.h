// Shared pieces of the CUDA benchmarks: the no-device skip, GPU-timed iterations and
// the layer shapes of the issue (Qwen2.5-0.5B and -7B).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "detinfer/philox.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_math.h"

namespace detinfer::kernels::cuda::bench {

// K x N of a linear layer (weights [N][K]).
struct LayerShape {
  std::int64_t k, n;
};
// Qwen2.5-0.5B: hidden 896, MLP 4864; Qwen2.5-7B: hidden 3584, MLP 18944.
inline constexpr LayerShape kShapes[] = {{896, 4864}, {4864, 896}, {3584, 18944}, {18944, 3584}};

inline bool skip_without_device(benchmark::State& state) {
  if (device_count() > 0) return false;
  state.SkipWithError("skipped: no CUDA device");
  return true;
}

// Times `launch` with CUDA events, one event pair per benchmark iteration.
template <typename F>
void gpu_loop(benchmark::State& state, F launch) {
  EventTimer timer;
  launch();  // warm-up (first-launch and cache effects)
  synchronize(nullptr);
  for (auto _ : state) {
    timer.start(nullptr);
    launch();
    timer.stop(nullptr);
    state.SetIterationTime(static_cast<double>(timer.elapsed_ms()) * 1e-3);
  }
}

// Device buffers filled with a repeating block of 64Ki Philox values in [-1, 1): cheap
// to build for 100+ MB weight matrices (generating every value on the host would
// dominate the run), and still non-trivial data for the kernels.
template <typename T, typename Convert>
DeviceBuffer random_buffer(std::size_t n, std::uint64_t seed, Convert convert) {
  const std::size_t block = n < (std::size_t{1} << 16) ? n : (std::size_t{1} << 16);
  std::vector<T> v(block);
  for (std::size_t i = 0; i < block; ++i)
    v[i] = convert(philox_uniform(seed, 0, i, 0) * 2.0f - 1.0f);
  DeviceBuffer b(n * sizeof(T));
  for (std::size_t at = 0; at < n; at += block) {
    const std::size_t len = n - at < block ? n - at : block;
    copy_from_host(static_cast<T*>(b.data()) + at, v.data(), len * sizeof(T));
  }
  return b;
}

inline DeviceBuffer random_bf16(std::size_t n, std::uint64_t seed) {
  return random_buffer<std::uint16_t>(n, seed, [](float x) { return dm::f32_to_bf16(x); });
}

inline DeviceBuffer random_f32(std::size_t n, std::uint64_t seed) {
  return random_buffer<float>(n, seed, [](float x) { return x; });
}

// Registers fn for every (shape, M) pair; args are {shape index, M}.
inline void shape_args(benchmark::internal::Benchmark* b, std::vector<std::int64_t> ms) {
  for (std::int64_t s = 0; s < static_cast<std::int64_t>(std::size(kShapes)); ++s)
    for (const std::int64_t m : ms) b->Args({s, m});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// The device-invariant tensor-core linear on (kShapes[range(0)], M = range(1)), with
// bf16 x and W and f32 output; bytes/s counts the weights, TFLOPS the multiply-adds.
inline void run_tensor_core_linear(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const LayerShape s = kShapes[state.range(0)];
  const std::int64_t m = state.range(1);
  const DeviceBuffer w = random_bf16(s.n * s.k, 1);
  const DeviceBuffer x = random_bf16(m * s.k, 2);
  DeviceBuffer y(m * s.n * sizeof(float));
  gpu_loop(state, [&] {
    linear_bf16_tc(x.as<std::uint16_t>(), s.k, m, w.as<std::uint16_t>(), s.n, s.k, nullptr,
                   y.as<float>(), s.n, nullptr);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.n * s.k * 2));
  state.counters["TFLOPS"] = benchmark::Counter(
      2.0 * static_cast<double>(m * s.n * s.k) * 1e-12 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

}  // namespace detinfer::kernels::cuda::bench
