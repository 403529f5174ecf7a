// Canonical CPU kernels vs the machine's own limits, each ratio measured in the same
// run (interleaved iterations) because these machines are noisy:
//   - decode linear (M=1, bf16 weights): weight bytes/s vs a plain sequential read of
//     the same number of bytes with the same threads;
//   - prefill linear (M=256, f32): FLOP/s vs torch::mm (OpenBLAS), same threads;
//   - decode attention over a paged KV cache: KV bytes/s vs the same read.
// "cold" variants rotate over copies totalling ~256 MiB so data comes from DRAM, as in
// a real model whose weights do not fit in the caches; "hot" ones reuse one copy.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "bench_kernels_torch.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "detinfer/philox.h"
#include "kernels/kernels.h"

namespace detinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::PackedLinear;

constexpr std::size_t kColdBytes = std::size_t{256} << 20;

core::ThreadPool* pool_for(int threads) {
  static std::unique_ptr<core::ThreadPool> pools[17];
  if (threads <= 1) return nullptr;
  if (!pools[threads]) pools[threads] = std::make_unique<core::ThreadPool>(threads);
  return pools[threads].get();
}

// CPU time of the calling thread: with one thread it shows the kernel's own cost even
// when the machine is shared (wall time then includes time spent preempted).
double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<float> random_floats(std::size_t n, std::uint64_t stream) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    float u = uniform01(philox_bits(7, stream, i, 0)) * 2.0f - 1.0f;
    v[i] = u == 0.0f ? 0.5f : u;
  }
  return v;
}

// The reference "plain sequential read": every byte of [p, p+n) loaded once with
// 32-byte loads, split into one contiguous range per thread.
__attribute__((target("avx2"))) std::uint64_t read_range_avx2(const std::uint8_t* p,
                                                              std::size_t n) {
  typedef long long v4 __attribute__((vector_size(32)));
  v4 a = {0, 0, 0, 0}, b = a, c = a, d = a;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    v4 x0, x1, x2, x3;
    std::memcpy(&x0, p + i, 32);
    std::memcpy(&x1, p + i + 32, 32);
    std::memcpy(&x2, p + i + 64, 32);
    std::memcpy(&x3, p + i + 96, 32);
    a ^= x0;
    b ^= x1;
    c ^= x2;
    d ^= x3;
  }
  a ^= b ^ c ^ d;
  return static_cast<std::uint64_t>(a[0] ^ a[1] ^ a[2] ^ a[3]) + i;
}

double timed_read(const std::uint8_t* p, std::size_t n, core::ThreadPool* pool) {
  const auto t0 = Clock::now();
  std::uint64_t sink[16] = {};
  if (pool == nullptr) {
    sink[0] = read_range_avx2(p, n);
  } else {
    const std::int64_t parts = pool->num_threads();
    pool->parallel_for(parts, 1, [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t t = a; t < b; ++t) {
        const std::size_t lo = n * t / parts, hi = n * (t + 1) / parts;
        sink[t] = read_range_avx2(p + lo, hi - lo);
      }
    });
  }
  benchmark::DoNotOptimize(sink);
  return seconds(t0, Clock::now());
}

// Interleaved kernel and read timings of one benchmark: wall time (what the ratio
// uses) and, with one thread, the thread's CPU time, which excludes time spent
// preempted on a shared machine ("cpu_ratio").
struct VsRead {
  double kernel_s = 0, read_s = 0, kernel_cpu_s = 0, read_cpu_s = 0;
  bool manual_time = true;  // the kernel's time is the iteration's (SetIterationTime adds up)

  template <typename F>
  void kernel(benchmark::State& state, F&& f) {
    const double c0 = thread_cpu_s();
    const auto t0 = Clock::now();
    f();
    const double s = seconds(t0, Clock::now());
    kernel_cpu_s += thread_cpu_s() - c0;
    kernel_s += s;
    if (manual_time) state.SetIterationTime(s);
  }
  void read(const std::uint8_t* p, std::size_t n, core::ThreadPool* pool) {
    const double c0 = thread_cpu_s();
    read_s += timed_read(p, n, pool);
    read_cpu_s += thread_cpu_s() - c0;
  }
  void report(benchmark::State& state, double bytes, int threads) const {
    const double n = static_cast<double>(state.iterations());
    state.counters["GBps"] = bytes * n / kernel_s / 1e9;
    state.counters["read_GBps"] = bytes * n / read_s / 1e9;
    state.counters["ratio"] = read_s / kernel_s;
    if (threads == 1) {
      state.counters["cpu_ratio"] = read_cpu_s / kernel_cpu_s;
      state.counters["cpu_us"] = kernel_cpu_s / n * 1e6;  // the kernel's CPU time per call
    }
  }
};

// --- decode linear ----------------------------------------------------------------

struct LinearSet {
  std::vector<PackedLinear> copies;
  std::vector<std::uint8_t> read_buf;  // copies.size() * weight bytes
  std::size_t bytes = 0;
};

const LinearSet& linear_set(std::int64_t k, std::int64_t n, bool cold) {
  static std::unique_ptr<LinearSet> cache[2][2];
  const int shape = k == 896 ? 0 : 1;
  auto& slot = cache[shape][cold ? 1 : 0];
  if (slot) return *slot;
  slot = std::make_unique<LinearSet>();
  const std::size_t bytes = static_cast<std::size_t>(n * k) * 2;
  const std::size_t copies = cold ? (kColdBytes + bytes - 1) / bytes : 1;
  std::vector<std::uint16_t> w(static_cast<std::size_t>(n * k));
  for (std::size_t c = 0; c < copies; ++c) {
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<std::uint16_t>(philox_bits(11, c, i, 0) >> 16) & 0xbfffu;
    slot->copies.push_back(PackedLinear::pack(w.data(), core::DType::kBF16, n, k));
  }
  slot->read_buf.assign(copies * bytes, 1);
  slot->bytes = bytes;
  return *slot;
}

void BM_DecodeLinearBf16(benchmark::State& state) {
  const std::int64_t k = state.range(0), n = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  const LinearSet& set = linear_set(k, n, cold);
  core::ThreadPool* pool = pool_for(threads);
  const std::vector<float> x = random_floats(static_cast<std::size_t>(k), 1);
  std::vector<float> y(static_cast<std::size_t>(n));
  VsRead t;
  std::size_t it = 0;
  for (auto _ : state) {
    const std::size_t c = it++ % set.copies.size();
    t.kernel(state, [&] { set.copies[c].run(x.data(), k, 1, y.data(), n, pool); });
    t.read(set.read_buf.data() + c * set.bytes, set.bytes, pool);
    benchmark::DoNotOptimize(y.data());
  }
  t.report(state, static_cast<double>(set.bytes), threads);
}

// --- batched decode linear (M sequences, one step) -----------------------------------
//
// M rows through cold bf16 weights, interleaved with the M = 1 call on a copy half the
// set away: "speedup" = M * t(1) / t(M), the aggregate rows/s over batch 1's (the
// engine's batched-decode gain if the linears were the whole step). Until session 3 the
// M = 1 call read the next iteration's copy, so the M-row call found its weights in L3.
void BM_BatchedLinearBf16(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const LinearSet& set = linear_set(k, n, true);
  core::ThreadPool* pool = pool_for(threads);
  const std::vector<float> x = random_floats(static_cast<std::size_t>(m * k), 1);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  double tm = 0, t1 = 0, cm = 0, c1 = 0, best_m = 1e30, best_1 = 1e30;
  std::size_t it = 0;
  for (auto _ : state) {
    const std::size_t c = it++ % set.copies.size();
    const double ca = thread_cpu_s();
    const auto a = Clock::now();
    set.copies[c].run(x.data(), k, m, y.data(), n, pool);
    const auto b = Clock::now();
    const double cb = thread_cpu_s();
    // The M = 1 call reads a copy half the set away: the next iteration's M-row call
    // (copy c + 1) must not find its weights in cache.
    set.copies[(c + set.copies.size() / 2) % set.copies.size()].run(x.data(), k, 1, y.data(), n,
                                                                    pool);
    const auto e = Clock::now();
    c1 += thread_cpu_s() - cb;
    cm += cb - ca;
    best_1 = std::min(best_1, seconds(b, e));
    best_m = std::min(best_m, seconds(a, b));
    state.SetIterationTime(seconds(a, b));
    tm += seconds(a, b);
    t1 += seconds(b, e);
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPS"] = 2.0 * static_cast<double>(m * n * k) * iters / tm / 1e9;
  state.counters["speedup"] = static_cast<double>(m) * t1 / tm;
  // Fastest iteration of each (least disturbed by other load on a shared machine).
  state.counters["best_speedup"] = static_cast<double>(m) * best_1 / best_m;
  // One thread: the same in the thread's CPU time (robust to preemption).
  if (threads == 1) {
    state.counters["cpu_GFLOPS"] = 2.0 * static_cast<double>(m * n * k) * iters / cm / 1e9;
    state.counters["cpu_speedup"] = static_cast<double>(m) * c1 / cm;
  }
}

// --- fma peak ------------------------------------------------------------------------
//
// The core's fma rate in the widest vectors the kernels dispatch to: AVX-512, 24
// independent 16-lane fma chains, else AVX2 + FMA, 12 independent 8-lane chains (16 ymm
// registers; enough to cover the latency on any current x86), per thread CPU second. The
// ceiling of any canonical linear, which performs one f32 fma per multiply-add
// (docs/numerics.md): batched decode cannot aggregate more tokens per CPU second than
// this / (2 x linear weights).
__attribute__((target("avx512f"))) float fma_chains(std::int64_t iters) {
  __m512 a[24];
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.0001f);
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  alignas(64) float lanes[16];
  float s = 0.0f;
  for (int i = 0; i < 24; ++i) {
    _mm512_store_ps(lanes, a[i]);
    s += lanes[i % 16];
  }
  return s;
}

__attribute__((target("avx2,fma"))) float fma_chains256(std::int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.0001f);
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  alignas(32) float lanes[8];
  float s = 0.0f;
  for (int i = 0; i < 12; ++i) {
    _mm256_store_ps(lanes, a[i]);
    s += lanes[i % 8];
  }
  return s;
}

void BM_FmaPeak(benchmark::State& state) {
  const bool avx512 = kernels::isa_supported(kernels::Isa::kAvx512);
  if (!avx512 && !kernels::isa_supported(kernels::Isa::kAvx2)) {
    state.SkipWithError("neither AVX-512 nor AVX2 + FMA on this CPU");
    return;
  }
  constexpr std::int64_t kIters = 1 << 20;
  double cpu = 0;
  for (auto _ : state) {
    const double c0 = thread_cpu_s();
    benchmark::DoNotOptimize(avx512 ? fma_chains(kIters) : fma_chains256(kIters));
    cpu += thread_cpu_s() - c0;
  }
  const double fmas_per_iter = avx512 ? 16.0 * 24 : 8.0 * 12;
  state.counters["cpu_GFLOPS"] =
      2.0 * fmas_per_iter * kIters * static_cast<double>(state.iterations()) / cpu / 1e9;
  state.SetLabel(avx512 ? "avx512" : "avx2");
}

// --- thread pool ---------------------------------------------------------------------
//
// Round trip of one parallel_for with trivial work per thread (the synchronization a
// forward step pays a few hundred times), back to back as in a step.
void BM_ParallelForRoundTrip(benchmark::State& state) {
  core::ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<std::int64_t> sink(64, 0);
  for (auto _ : state) {
    pool.parallel_for(pool.num_threads(), 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) sink[static_cast<std::size_t>(i) * 8] += i;
    });
  }
  benchmark::DoNotOptimize(sink.data());
}

// --- prefill linear vs torch::mm -----------------------------------------------------

void BM_PrefillLinearF32VsTorch(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  core::ThreadPool* pool = pool_for(threads);
  const std::vector<float> x = random_floats(static_cast<std::size_t>(m * k), 2);
  const std::vector<float> w = random_floats(static_cast<std::size_t>(n * k), 3);
  const PackedLinear packed = PackedLinear::pack(w.data(), core::DType::kF32, n, k);
  TorchLinear torch_mm(x.data(), w.data(), m, n, k);
  torch_mm.set_threads(threads);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  double ours_s = 0, torch_s = 0, ours_cpu = 0, torch_cpu = 0;
  for (auto _ : state) {
    const double c0 = thread_cpu_s();
    const auto t0 = Clock::now();
    packed.run(x.data(), k, m, y.data(), n, pool);
    const auto t1 = Clock::now();
    const double c1 = thread_cpu_s();
    torch_mm.run();
    const auto t2 = Clock::now();
    torch_cpu += thread_cpu_s() - c1;
    ours_cpu += c1 - c0;
    state.SetIterationTime(seconds(t0, t1));
    ours_s += seconds(t0, t1);
    torch_s += seconds(t1, t2);
    benchmark::DoNotOptimize(y.data());
  }
  if (threads == 1) state.counters["cpu_ratio"] = torch_cpu / ours_cpu;
  const double flops =
      2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations());
  state.counters["GFLOPS"] = flops / ours_s / 1e9;
  state.counters["torch_GFLOPS"] = flops / torch_s / 1e9;
  state.counters["ratio"] = torch_s / ours_s;
}

// --- decode attention ---------------------------------------------------------------

struct KvSet {
  std::int64_t tokens, kv_heads, head_dim, block;
  std::vector<std::vector<float>> k, v;
  std::vector<std::int32_t> table;
  std::vector<std::uint8_t> read_buf;
  std::size_t bytes = 0;  // K+V bytes one call reads
};

const KvSet& kv_set(bool cold, std::int64_t tokens) {
  static std::map<std::pair<bool, std::int64_t>, std::unique_ptr<KvSet>> cache;
  auto& slot = cache[{cold, tokens}];
  if (slot) return *slot;
  slot = std::make_unique<KvSet>();
  KvSet& s = *slot;
  s.tokens = tokens;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.block = 16;
  const std::size_t floats = static_cast<std::size_t>(s.tokens * s.kv_heads * s.head_dim);
  s.bytes = 2 * floats * sizeof(float);
  const std::size_t copies = cold ? std::max<std::size_t>(2, kColdBytes / s.bytes) : 1;
  for (std::size_t c = 0; c < copies; ++c) {
    s.k.push_back(random_floats(floats, 100 + 2 * c));
    s.v.push_back(random_floats(floats, 101 + 2 * c));
  }
  for (std::int64_t b = 0; b < s.tokens / s.block; ++b)
    s.table.push_back(static_cast<std::int32_t>(b));
  s.read_buf.assign(copies * s.bytes, 1);
  return s;
}

void BM_DecodeAttention(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool cold = state.range(1) != 0;
  const KvSet& s = kv_set(cold, state.range(2));
  const std::int64_t heads = 14;
  core::ThreadPool* pool = pool_for(threads);
  const std::vector<float> q = random_floats(static_cast<std::size_t>(heads * s.head_dim), 5);
  std::vector<float> out(q.size());
  const std::int64_t num_keys = s.tokens;
  VsRead t;
  std::size_t it = 0;
  for (auto _ : state) {
    const std::size_t c = it++ % s.k.size();
    const kernels::PagedKvView kv{
        s.k[c].data(), s.v[c].data(), s.table.data(), static_cast<std::int64_t>(s.table.size()),
        s.block,       s.kv_heads,    s.head_dim};
    t.kernel(state, [&] {
      kernels::attention(q.data(), heads * s.head_dim, 1, &num_keys, heads, kv, 0.125f, out.data(),
                         heads * s.head_dim, pool);
    });
    t.read(s.read_buf.data() + c * s.bytes, s.bytes, pool);
    benchmark::DoNotOptimize(out.data());
  }
  t.report(state, static_cast<double>(s.bytes), threads);
}

// The attention kernel alone, one thread, timed in the thread's CPU time (no read probe
// between calls, so "hot" KV stays in the caches): the figure to compare two builds of the
// kernel with on a shared machine (its "min" over repetitions).
void BM_DecodeAttentionCpu(benchmark::State& state) {
  const bool cold = state.range(0) != 0;
  const KvSet& s = kv_set(cold, state.range(1));
  const std::int64_t heads = 14;
  const std::vector<float> q = random_floats(static_cast<std::size_t>(heads * s.head_dim), 5);
  std::vector<float> out(q.size());
  const std::int64_t num_keys = s.tokens;
  std::size_t it = 0;
  for (auto _ : state) {
    const std::size_t c = it++ % s.k.size();
    const kernels::PagedKvView kv{
        s.k[c].data(), s.v[c].data(), s.table.data(), static_cast<std::int64_t>(s.table.size()),
        s.block,       s.kv_heads,    s.head_dim};
    const double c0 = thread_cpu_s();
    kernels::attention(q.data(), heads * s.head_dim, 1, &num_keys, heads, kv, 0.125f, out.data(),
                       heads * s.head_dim, nullptr);
    state.SetIterationTime(thread_cpu_s() - c0);
    benchmark::DoNotOptimize(out.data());
  }
}

// The same K/V stored as bf16 (2 bytes per element, PagedKvView::kv_dtype) against f32,
// interleaved in one run: f32_cpu_ratio = f32 CPU time / bf16 CPU time (1 thread), the
// bandwidth of each over the bytes it actually reads (bf16: half), and the read probe's.
void BM_DecodeAttentionBf16VsF32(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool cold = state.range(1) != 0;
  const KvSet& s = kv_set(cold, state.range(2));
  const std::int64_t heads = 14;
  core::ThreadPool* pool = pool_for(threads);
  std::vector<std::vector<std::uint16_t>> hk(s.k.size()), hv(s.v.size());
  for (std::size_t c = 0; c < s.k.size(); ++c) {
    hk[c].resize(s.k[c].size());
    hv[c].resize(s.v[c].size());
    kernels::store_as_dtype(s.k[c].data(), hk[c].data(), static_cast<std::int64_t>(hk[c].size()),
                            core::DType::kBF16);
    kernels::store_as_dtype(s.v[c].data(), hv[c].data(), static_cast<std::int64_t>(hv[c].size()),
                            core::DType::kBF16);
  }
  const std::vector<float> q = random_floats(static_cast<std::size_t>(heads * s.head_dim), 5);
  std::vector<float> out(q.size());
  const std::int64_t num_keys = s.tokens;
  VsRead half, full;
  full.manual_time = false;
  std::size_t it = 0;
  for (auto _ : state) {
    const std::size_t c = it++ % s.k.size();
    kernels::PagedKvView kv{
        s.k[c].data(), s.v[c].data(), s.table.data(), static_cast<std::int64_t>(s.table.size()),
        s.block,       s.kv_heads,    s.head_dim};
    auto run = [&] {
      kernels::attention(q.data(), heads * s.head_dim, 1, &num_keys, heads, kv, 0.125f, out.data(),
                         heads * s.head_dim, pool);
    };
    full.kernel(state, run);
    full.read(s.read_buf.data() + c * s.bytes, s.bytes, pool);
    kv.k_pool = hk[c].data();
    kv.v_pool = hv[c].data();
    kv.kv_dtype = core::DType::kBF16;
    half.kernel(state, run);  // the iteration's manual time: the bf16 kernel's
    benchmark::DoNotOptimize(out.data());
  }
  const double n = static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(s.bytes);
  state.counters["f32_us"] = full.kernel_s / n * 1e6;
  state.counters["bf16_us"] = half.kernel_s / n * 1e6;
  state.counters["f32_GBps"] = bytes * n / full.kernel_s / 1e9;
  state.counters["bf16_GBps"] = bytes / 2 * n / half.kernel_s / 1e9;
  state.counters["read_GBps"] = bytes * n / full.read_s / 1e9;
  // Fractions of the read bandwidth (one probe: the f32 KV bytes, read after the f32
  // kernel) over the bytes each kernel actually reads, bf16 half of f32's (wall; CPU time
  // at 1 thread), and the f32 kernel's CPU time over the bf16 kernel's.
  state.counters["f32_ratio"] = full.read_s / full.kernel_s;
  state.counters["bf16_ratio"] = full.read_s / 2 / half.kernel_s;
  if (threads == 1) {
    state.counters["f32_cpu_ratio"] = full.read_cpu_s / full.kernel_cpu_s;
    state.counters["bf16_cpu_ratio"] = full.read_cpu_s / 2 / half.kernel_cpu_s;
    state.counters["f32_over_bf16_cpu"] = full.kernel_cpu_s / half.kernel_cpu_s;
  }
}

// args: K, N, threads, cold
BENCHMARK(BM_DecodeLinearBf16)
    ->ArgNames({"K", "N", "threads", "cold"})
    ->ArgsProduct({{896}, {4864}, {1, 2}, {0, 1}})
    ->ArgsProduct({{4864}, {896}, {1, 2}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// args: M, K, N, threads
BENCHMARK(BM_BatchedLinearBf16)
    ->ArgNames({"M", "K", "N", "threads"})
    ->ArgsProduct({{2, 4, 5, 8, 16, 32, 64}, {896}, {4864}, {1, 2}})
    ->ArgsProduct({{16, 32}, {4864}, {896}, {1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParallelForRoundTrip)->ArgName("threads")->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillLinearF32VsTorch)
    ->ArgNames({"M", "K", "N", "threads"})
    ->ArgsProduct({{256}, {896}, {4864}, {1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// args: threads, cold, keys (Qwen2.5-0.5B attention: 14 query heads, 2 kv heads, d 64)
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"threads", "cold", "keys"})
    ->ArgsProduct({{1, 2}, {0, 1}, {512, 2048, 8192}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeAttentionCpu)
    ->ArgNames({"cold", "keys"})
    ->ArgsProduct({{0, 1}, {512, 2048, 8192}})
    ->UseManualTime()
    ->ComputeStatistics("min",
                        [](const std::vector<double>& v) {
                          return *std::min_element(v.begin(), v.end());
                        })
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeAttentionBf16VsF32)
    ->ArgNames({"threads", "cold", "keys"})
    ->ArgsProduct({{1, 2}, {0, 1}, {8192, 16384}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace detinfer::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("kernels_isa",
                              detinfer::kernels::to_string(detinfer::kernels::active_isa()));
  benchmark::AddCustomContext("cpu", detinfer::core::cpu_model_name());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
