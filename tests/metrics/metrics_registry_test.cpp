// Registry semantics: handles, validation, thread safety.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/metrics.h"

namespace detinfer {
namespace {

TEST(MetricsRegistry, CounterGaugeHistogramMove) {
  MetricsRegistry r;
  const Counter c = r.counter("t_total", "help");
  c.inc();
  c.inc(41);
  EXPECT_EQ(c.value(), 42u);
  const Gauge g = r.gauge("t_gauge", "help");
  g.set(3.5);
  g.inc();
  g.dec();
  g.add(-1.25);
  EXPECT_EQ(g.value(), 2.25);
  const Histogram h = r.histogram("t_hist", "help", {1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 5.0, 7.0, -3.0}) h.observe(v);
  EXPECT_EQ(h.count(), 6u);
  EXPECT_EQ(h.sum(), 12.0);
  // Upper bounds are inclusive: 1.0 goes to le=1, 5.0 to le=5.
  EXPECT_EQ(h.bucket_counts(), (std::vector<std::uint64_t>{3, 1, 1, 1}));
}

TEST(MetricsRegistry, SameSeriesTwiceIsTheSameCell) {
  MetricsRegistry r;
  const Counter a = r.counter("x_total", "h", {{"k", "v"}});
  const Counter b = r.counter("x_total", "h", {{"k", "v"}});
  const Counter other = r.counter("x_total", "h", {{"k", "w"}});
  a.inc(2);
  b.inc(3);
  other.inc();
  EXPECT_EQ(a.value(), 5u);
  EXPECT_EQ(other.value(), 1u);
}

TEST(MetricsRegistry, DefaultHandlesAreNoOps) {
  const Counter c;
  const Gauge g;
  const Histogram h;
  c.inc();
  g.set(5);
  h.observe(1);
  EXPECT_EQ(c.value(), 0u);
  EXPECT_EQ(g.value(), 0.0);
  EXPECT_EQ(h.count(), 0u);
  SessionMetrics off;
  off.requests(FinishReason::kStop).inc();
  off.time_to_first_token.observe(0.1);
}

TEST(MetricsRegistry, RejectsInvalidNamesAndConflicts) {
  MetricsRegistry r;
  auto expect_invalid = [](auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "expected Error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  };
  expect_invalid([&] { r.counter("1abc", "h"); });
  expect_invalid([&] { r.counter("a-b", "h"); });
  expect_invalid([&] { r.counter("", "h"); });
  expect_invalid([&] { r.counter("ok_total", "h", {{"__reserved", "x"}}); });
  expect_invalid([&] { r.counter("ok_total", "h", {{"bad-label", "x"}}); });
  expect_invalid([&] { r.histogram("hist", "h", {1}, {{"le", "x"}}); });
  expect_invalid([&] { r.histogram("hist", "h", {2, 1}); });
  expect_invalid([&] { r.histogram("hist", "h", {1, 1}); });
  r.counter("dup_total", "h", {{"a", "1"}});
  expect_invalid([&] { r.gauge("dup_total", "h", {{"a", "1"}}); });
  expect_invalid([&] { r.counter("dup_total", "other help", {{"a", "1"}}); });
  expect_invalid([&] { r.counter("dup_total", "h", {{"b", "1"}}); });
  r.histogram("hb", "h", {1, 2});
  expect_invalid([&] { r.histogram("hb", "h", {1, 3}); });
  // Colons are valid in metric names (recording rules use them).
  EXPECT_NO_THROW(r.gauge("ns:ok_gauge", "h"));
}

TEST(MetricsRegistry, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry r;
  const Counter c = r.counter("c_total", "h");
  const Gauge g = r.gauge("g", "h");
  const Histogram h = r.histogram("h", "h", {10, 100});
  constexpr int kThreads = 4, kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Registration races with updates too.
      const Counter mine = r.counter("per_thread_total", "h", {{"t", std::to_string(t)}});
      for (int i = 0; i < kIters; ++i) {
        c.inc();
        g.add(1.0);
        h.observe(static_cast<double>(i % 200));
        mine.inc();
        if (i % 1000 == 0) (void)r.render();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), static_cast<std::uint64_t>(kThreads * kIters));
  EXPECT_EQ(g.value(), static_cast<double>(kThreads * kIters));  // exact: small integers
  EXPECT_EQ(h.count(), static_cast<std::uint64_t>(kThreads * kIters));
  const auto b = h.bucket_counts();
  EXPECT_EQ(b[0] + b[1] + b[2], h.count());
  EXPECT_EQ(b[0], static_cast<std::uint64_t>(kThreads * (kIters / 200) * 11));
}

TEST(SessionMetrics, RequestsByFinishReason) {
  MetricsRegistry r;
  SessionMetrics m(r);
  m.requests(FinishReason::kStop).inc();
  m.requests(FinishReason::kStop).inc();
  m.requests(FinishReason::kLength).inc();
  m.requests(FinishReason::kCancelled).inc();
  EXPECT_EQ(m.requests_stop.value(), 2u);
  EXPECT_EQ(m.requests_length.value(), 1u);
  EXPECT_EQ(m.requests_cancelled.value(), 1u);
  EXPECT_EQ(m.consistency_ratio.value(), 1.0);
  // A second SessionMetrics on the same registry shares the series.
  SessionMetrics again(r);
  EXPECT_EQ(again.requests_stop.value(), 2u);
}

}  // namespace
}  // namespace detinfer

namespace detinfer {
namespace {

TEST(SessionMetrics, OnFinishedUpdatesPerRequestFamilies) {
  MetricsRegistry r;
  SessionMetrics m(r);
  GenerationResult res;
  res.prompt_tokens = {1, 2, 3, 4};
  res.sequences.resize(2);
  res.sequences[0].tokens = {5, 6, 7};
  res.sequences[0].finish_reason = FinishReason::kStop;
  res.sequences[1].tokens = {8};
  res.cache.prefix_cached_tokens = 16;
  res.timings.time_to_first_token_ms = 30;
  res.timings.token_ms = {30, 4, 6};
  m.on_finished(res);
  EXPECT_EQ(m.requests_stop.value(), 1u);
  EXPECT_EQ(m.prompt_tokens.value(), 4u);
  EXPECT_EQ(m.generated_tokens.value(), 4u);
  EXPECT_EQ(m.prefix_cached_tokens.value(), 16u);
  EXPECT_EQ(m.time_to_first_token.count(), 1u);
  EXPECT_DOUBLE_EQ(m.time_to_first_token.sum(), 0.03);
  EXPECT_EQ(m.inter_token_latency.count(), 2u);
  EXPECT_DOUBLE_EQ(m.inter_token_latency.sum(), 0.01);
}

}  // namespace
}  // namespace detinfer
