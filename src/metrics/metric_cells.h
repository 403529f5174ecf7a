// Storage behind the metric handles. Cells live in the registry at stable addresses and
// are updated with atomics only. Gauge and histogram sums keep a double's bits in a
// 64-bit atomic updated by compare-and-swap: metrics are observability, never an input
// to numerics, so the order of concurrent additions does not matter here.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace detinfer::metrics {

inline std::uint64_t double_bits(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline double bits_double(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// A double stored as bits in an atomic word.
struct AtomicDouble {
  std::atomic<std::uint64_t> bits{double_bits(0.0)};

  double load() const { return bits_double(bits.load(std::memory_order_relaxed)); }
  void store(double v) { bits.store(double_bits(v), std::memory_order_relaxed); }
  void add(double delta) {
    std::uint64_t old = bits.load(std::memory_order_relaxed);
    while (!bits.compare_exchange_weak(old, double_bits(bits_double(old) + delta),
                                       std::memory_order_relaxed)) {
    }
  }
};

struct CounterCell {
  std::atomic<std::uint64_t> value{0};
};

struct GaugeCell {
  AtomicDouble value;
};

struct HistogramCell {
  explicit HistogramCell(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)),
        counts(std::make_unique<std::atomic<std::uint64_t>[]>(bounds.size() + 1)) {
    for (std::size_t i = 0; i <= bounds.size(); ++i) counts[i].store(0);
  }
  std::vector<double> bounds;  // finite, strictly increasing; +Inf is implicit
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts;  // bounds.size() + 1 buckets
  std::atomic<std::uint64_t> count{0};
  AtomicDouble sum;
};

}  // namespace detinfer::metrics
