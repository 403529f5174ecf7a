// The read-bandwidth probe of bench_decode (docs/performance.md, "End-to-end decode"): an
// upper bound on how fast this machine's threads can stream memory, so that "fraction of
// the read-bandwidth bound" is never flattering. Each thread reads its own disjoint range
// of a 512 MiB buffer (far beyond the caches) in two shapes, each best of `passes`:
//  - one stream: 64-byte AVX-512 loads (32-byte AVX2 without AVX-512) into 8 independent
//    XOR accumulators, 8 loads per iteration;
//  - four streams: the thread's range cut into 4 parts read in lockstep (as decode walks
//    several weight matrices and the hardware prefetcher tracks several streams), 2
//    accumulators each;
//  - the same four streams, each also prefetched 1 KiB ahead (the M = 1 linear kernel's
//    access pattern, simd_linear.h);
// and the bound is the fastest of the three. The earlier probe (32-byte loads, 4 accumulators,
// one stream) under-measured: f32 decode came out at 1.06-1.13 of it.
#pragma once

#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace detinfer_bench {

inline double thread_cpu_now() {  // CPU seconds of the calling thread
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double cpu_now() {  // CPU seconds of the whole process (every thread)
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timed {
  double wall = 0, cpu = 0;  // seconds
};

inline Timed time_it(const std::function<void()>& fn) {
  using Clock = std::chrono::steady_clock;
  const double c0 = cpu_now();
  const auto t0 = Clock::now();
  fn();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), cpu_now() - c0};
}

namespace probe_detail {

// Reads [p, p + n) (n a multiple of 64 * S * A) as S streams of n / S bytes in lockstep,
// A 64-byte loads per stream per iteration, each into its own accumulator; PF > 0:
// each stream also prefetched PF bytes ahead (as the M = 1 linear kernel does).
template <int S, int A, int PF = 0>
__attribute__((target("avx512f"))) std::uint64_t read_avx512(const char* p, std::size_t n) {
  __m512i acc[S][A];
  for (int s = 0; s < S; ++s)
    for (int j = 0; j < A; ++j) acc[s][j] = _mm512_setzero_si512();
  const std::size_t part = n / S;
  for (std::size_t i = 0; i < part; i += 64 * A) {
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const char* b = p + s * part + i;
      if (PF > 0) {
        for (int j = 0; j < A; ++j) _mm_prefetch(b + PF + 64 * j, _MM_HINT_T0);
      }
#pragma GCC unroll 8
      for (int j = 0; j < A; ++j) {
        acc[s][j] = _mm512_xor_si512(acc[s][j], _mm512_load_si512(b + 64 * j));
      }
    }
  }
  __m512i r = _mm512_setzero_si512();
  for (int s = 0; s < S; ++s)
    for (int j = 0; j < A; ++j) r = _mm512_xor_si512(r, acc[s][j]);
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, r);
  return lanes[0] ^ lanes[3] ^ lanes[7];
}

// The same with 32-byte AVX2 loads (twice the loads per iteration).
template <int S, int A, int PF = 0>
__attribute__((target("avx2"))) std::uint64_t read_avx2(const char* p, std::size_t n) {
  __m256i acc[S][2 * A];
  for (int s = 0; s < S; ++s)
    for (int j = 0; j < 2 * A; ++j) acc[s][j] = _mm256_setzero_si256();
  const std::size_t part = n / S;
  for (std::size_t i = 0; i < part; i += 64 * A) {
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const char* b = p + s * part + i;
      if (PF > 0) {
        for (int j = 0; j < A; ++j) _mm_prefetch(b + PF + 64 * j, _MM_HINT_T0);
      }
#pragma GCC unroll 16
      for (int j = 0; j < 2 * A; ++j) {
        acc[s][j] = _mm256_xor_si256(
            acc[s][j], _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32 * j)));
      }
    }
  }
  __m256i r = _mm256_setzero_si256();
  for (int s = 0; s < S; ++s)
    for (int j = 0; j < 2 * A; ++j) r = _mm256_xor_si256(r, acc[s][j]);
  return static_cast<std::uint64_t>(_mm256_extract_epi64(r, 0) ^ _mm256_extract_epi64(r, 3));
}

// The earlier probe: 32-byte generic-vector loads XOR-folded into 4 accumulators.
inline std::uint64_t read_xor32(const char* p, std::size_t n) {
  typedef std::uint64_t V __attribute__((vector_size(32)));
  V a{}, b{}, c{}, d{}, x;
  for (std::size_t i = 0; i + 128 <= n; i += 128) {
    std::memcpy(&x, p + i, 32);
    a ^= x;
    std::memcpy(&x, p + i + 32, 32);
    b ^= x;
    std::memcpy(&x, p + i + 64, 32);
    c ^= x;
    std::memcpy(&x, p + i + 96, 32);
    d ^= x;
  }
  const V s = a ^ b ^ c ^ d;
  return s[0] ^ s[1] ^ s[2] ^ s[3];
}

}  // namespace probe_detail

class ReadProbe {
 public:
  ReadProbe() : buf_(kBytes / 8) {
    for (std::size_t i = 0; i < buf_.size(); ++i) buf_[i] = i * 0x9E3779B97F4A7C15ull;
    avx512_ = __builtin_cpu_supports("avx512f");
  }
  // Bytes per wall second and per CPU second (the slowest thread's CPU time) of `threads`
  // threads: the fastest shape, best of `passes` passes each.
  Timed bandwidth(int threads, int passes = 3) {
    Timed best{0, 0};
    for (const Shape& shape : shapes()) {
      if (!shape.bound) continue;
      const Timed b = run(threads, shape.fn, passes);
      best = {std::max(best.wall, b.wall), std::max(best.cpu, b.cpu)};
    }
    return best;
  }
  // Each shape's bandwidth (bytes per wall second, per CPU second), the bound's and the
  // earlier probe's (32-byte loads, 4 accumulators: for comparison only).
  struct ShapeBandwidth {
    const char* name;
    Timed bandwidth;
  };
  std::vector<ShapeBandwidth> each_shape(int threads, int passes) {
    std::vector<ShapeBandwidth> out;
    for (const Shape& shape : shapes()) out.push_back({shape.name, run(threads, shape.fn, passes)});
    return out;
  }

 private:
  typedef std::uint64_t (*ReadFn)(const char*, std::size_t);
  struct Shape {
    const char* name;
    ReadFn fn;
    bool bound;  // part of the bound (false: the earlier probe, for comparison)
  };
  std::vector<Shape> shapes() const {
    using namespace probe_detail;
    return {{"one stream, 8 accumulators", avx512_ ? &read_avx512<1, 8> : &read_avx2<1, 8>, true},
            {"4 streams", avx512_ ? &read_avx512<4, 2> : &read_avx2<4, 2>, true},
            {"4 streams, prefetch 1 KiB",
             avx512_ ? &read_avx512<4, 2, 1024> : &read_avx2<4, 2, 1024>, true},
            {"earlier probe: 32-byte loads, 4 accumulators", &read_xor32, false}};
  }
  static constexpr std::size_t kBytes = std::size_t{512} << 20;
  static constexpr std::size_t kAlign = 4096;  // every thread's range and stream is aligned

  // Own threads, not the pool's: a pool worker that is slow to wake lets the caller claim
  // its range, and a pass that ran on one thread under-measures two (seen: 45 instead of
  // 85 GB/s). Each pass starts its threads, waits until all of them spin at a barrier,
  // then releases them; a thread times its own read (wall and CPU) from the release, and
  // the pass takes the slowest thread's time.
  Timed run(int threads, ReadFn fn, int passes) {
    const char* base = reinterpret_cast<const char*>(buf_.data());
    base += (kAlign - reinterpret_cast<std::uintptr_t>(base) % kAlign) % kAlign;
    // Per thread: a multiple of 4 streams x kAlign bytes (inside the aligned buffer).
    const std::size_t per = (kBytes - kAlign) / threads / (4 * kAlign) * (4 * kAlign);
    double best_wall = 1e30, best_cpu = 1e30;
    std::vector<std::uint64_t> sink(static_cast<std::size_t>(threads) * 8);
    for (int pass = 0; pass < passes; ++pass) {
      std::atomic<int> arrived{0};
      std::atomic<bool> go{false};
      std::vector<Timed> took(static_cast<std::size_t>(threads));
      auto body = [&](int t) {
        arrived.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = thread_cpu_now();
        sink[static_cast<std::size_t>(t) * 8] = fn(base + per * static_cast<std::size_t>(t), per);
        took[static_cast<std::size_t>(t)] = {
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            thread_cpu_now() - c0};
      };
      std::vector<std::thread> helpers;
      for (int t = 1; t < threads; ++t) helpers.emplace_back(body, t);
      while (arrived.load() < threads - 1) {
      }
      go.store(true, std::memory_order_release);
      body(0);
      for (std::thread& h : helpers) h.join();
      Timed slowest;
      for (const Timed& x : took)
        slowest = {std::max(slowest.wall, x.wall), std::max(slowest.cpu, x.cpu)};
      best_wall = std::min(best_wall, slowest.wall);
      best_cpu = std::min(best_cpu, slowest.cpu);
    }
    if (sink[0] == 42) std::printf(" ");
    const double bytes = static_cast<double>(per) * threads;
    return {bytes / best_wall, bytes / best_cpu};
  }

  std::vector<std::uint64_t> buf_;
  bool avx512_ = false;
};

}  // namespace detinfer_bench
