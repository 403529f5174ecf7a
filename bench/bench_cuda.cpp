// CUDA kernel benchmarks (issue 11). Every figure is meant to be read as a ratio against
// another benchmark of the same run: canonical linear bytes/s vs BM_CopyD2D on the same
// bytes, device-invariant vs canonical, split vs canonical attention.
// Run: build/<dir>/bench/bench_cuda --benchmark_min_time=0.05   (needs a GPU)
#include <cmath>

#include "cuda_bench_util.h"

namespace detinfer::kernels::cuda::bench {
namespace {

// Baseline: a device-to-device copy of a layer's bf16 weights (read + write).
void BM_CopyD2D(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const LayerShape s = kShapes[state.range(0)];
  const std::size_t bytes = static_cast<std::size_t>(s.k * s.n) * 2;
  DeviceBuffer a(bytes);
  DeviceBuffer b(bytes);
  a.fill_zero();
  gpu_loop(state, [&] { copy_device(b.data(), a.data(), bytes, nullptr); });
  // Read + write: the HBM traffic a copy achieves is the bandwidth ceiling for kernels
  // that only read (the linear benchmarks count the weight bytes they read).
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes * 2));
}
BENCHMARK(BM_CopyD2D)->DenseRange(0, 3)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Canonical linear (bitwise = CPU) on bf16 weights: bytes of weights read per second.
void BM_CanonicalLinearBf16(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const LayerShape s = kShapes[state.range(0)];
  const std::int64_t m = state.range(1);
  const DeviceBuffer w = random_bf16(s.n * s.k, 1);
  const DeviceBuffer x = random_f32(m * s.k, 2);
  DeviceBuffer y(m * s.n * sizeof(float));
  gpu_loop(state, [&] {
    linear(x.as<float>(), s.k, m, w.data(), core::DType::kBF16, s.n, s.k, nullptr, y.as<float>(),
           s.n, nullptr);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.n * s.k * 2));
}
BENCHMARK(BM_CanonicalLinearBf16)->Apply([](auto* b) { shape_args(b, {1, 8, 64}); });

// Device-invariant tensor-core linear (bf16 x and W, f32 out).
void BM_TensorCoreLinear(benchmark::State& state) { run_tensor_core_linear(state); }
BENCHMARK(BM_TensorCoreLinear)->Apply([](auto* b) { shape_args(b, {1, 8, 64, 4096}); });

// RMSNorm over `rows` rows of the 7B hidden size: canonical (arg 0) vs fast (arg 1).
void BM_RmsNorm(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const bool fast = state.range(0) == 1;
  const std::int64_t rows = state.range(1);
  const std::int64_t n = 3584;
  const DeviceBuffer x = random_f32(rows * n, 3);
  const DeviceBuffer w = random_f32(n, 4);
  DeviceBuffer y(rows * n * sizeof(float));
  gpu_loop(state, [&] {
    if (fast) {
      rms_norm_fast(x.as<float>(), n, w.as<float>(), 1e-6f, y.as<float>(), n, rows, n, nullptr);
    } else {
      rms_norm(x.as<float>(), n, w.as<float>(), 1e-6f, y.as<float>(), n, rows, n, nullptr);
    }
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * rows * n * 4));
}
BENCHMARK(BM_RmsNorm)
    ->ArgsProduct({{0, 1}, {1, 16, 4096}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Decode attention (one query row) over `keys` cached tokens; arg 0: canonical (0) or
// split (1); arg 1: 0 = 0.5B heads (14 q, 2 kv, d 64), 1 = 7B heads (28 q, 4 kv, d 128).
void BM_AttentionDecode(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const bool split = state.range(0) == 1;
  const bool big = state.range(1) == 1;
  const std::int64_t keys = state.range(2);
  const std::int64_t heads = big ? 28 : 14, kv_heads = big ? 4 : 2, d = big ? 128 : 64;
  const std::int64_t block = 16, blocks = (keys + block - 1) / block;
  const DeviceBuffer k = random_f32(blocks * block * kv_heads * d, 5);
  const DeviceBuffer v = random_f32(blocks * block * kv_heads * d, 6);
  std::vector<std::int32_t> table(blocks);
  for (std::int64_t i = 0; i < blocks; ++i) table[i] = static_cast<std::int32_t>(i);
  DeviceBuffer dtable(table.size() * sizeof(std::int32_t));
  dtable.upload(table.data(), dtable.bytes());
  DeviceBuffer dkeys(sizeof(std::int64_t));
  dkeys.upload(&keys, sizeof keys);
  const DeviceBuffer q = random_f32(heads * d, 7);
  DeviceBuffer out(heads * d * sizeof(float));
  DeviceBuffer ws(attention_split_workspace_bytes(1, heads, d, keys));
  const PagedKvView kv{
      k.as<float>(), v.as<float>(), dtable.as<std::int32_t>(), blocks, block, kv_heads, d};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  gpu_loop(state, [&] {
    if (split) {
      attention_split(q.as<float>(), heads * d, 1, dkeys.as<std::int64_t>(), keys, heads, kv, scale,
                      out.as<float>(), heads * d, ws.data(), ws.bytes(), nullptr);
    } else {
      cuda::attention(q.as<float>(), heads * d, 1, dkeys.as<std::int64_t>(), heads, kv, scale,
                      out.as<float>(), heads * d, nullptr);
    }
  });
  // Bytes of K and V read per second.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * keys * kv_heads * d * 8));
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{0, 1}, {0, 1}, {2048, 8192}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace detinfer::kernels::cuda::bench

BENCHMARK_MAIN();
