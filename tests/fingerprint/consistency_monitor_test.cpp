// ConsistencyMonitor with injected replays: ratio 1.0 when every replay reproduces, the
// alarm fires with both fingerprints on an injected mismatch.
#include "detinfer/consistency_monitor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "detinfer/error.h"
#include "fingerprint/fingerprint_test_util.h"

namespace detinfer {
namespace {

using testing::make_fingerprint;

ConsistencyMonitorOptions all_sampled() {
  ConsistencyMonitorOptions o;
  o.sample_rate = 1.0;
  o.queue_capacity = 1000;
  return o;
}

TEST(ConsistencyMonitor, ReproducingReplaysKeepTheRatioAtOne) {
  MetricsRegistry registry;
  SessionMetrics metrics(registry);
  int alarms = 0;
  ConsistencyMonitor m(
      all_sampled(),
      [](const RunFingerprint& fp) { return RunFingerprint::from_json(fp.to_json()); },
      [&](const RunFingerprint&, const RunFingerprint&, double) { ++alarms; }, &metrics);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(m.submit(make_fingerprint(i)));
  m.drain();
  const ConsistencyStats s = m.stats();
  EXPECT_EQ(s.checks, 20u);
  EXPECT_EQ(s.matches, 20u);
  EXPECT_EQ(s.ratio, 1.0);
  EXPECT_EQ(alarms, 0);
  EXPECT_EQ(metrics.consistency_ratio.value(), 1.0);
  EXPECT_EQ(metrics.replay_match.value(), 20u);
  EXPECT_NE(registry.render().find("detinfer_consistency_ratio 1\n"), std::string::npos);
}

TEST(ConsistencyMonitor, InjectedMismatchFiresTheAlarmWithBothFingerprints) {
  MetricsRegistry registry;
  SessionMetrics metrics(registry);
  std::mutex mu;
  std::vector<std::pair<RunFingerprint, RunFingerprint>> fired;
  std::vector<double> ratios;
  const RunFingerprint bad = make_fingerprint(7);
  ConsistencyMonitor m(
      all_sampled(),
      [&](const RunFingerprint& fp) {
        RunFingerprint r = fp;
        if (fp.request_key() == bad.request_key()) {  // the injected nondeterminism
          r.sequences[0].step_digests[3] ^= 0x10;
          r.sequences[0].chain_digest = chain_digest(r.sequences[0].step_digests);
        }
        return r;
      },
      [&](const RunFingerprint& original, const RunFingerprint& replayed, double ratio) {
        std::lock_guard<std::mutex> lock(mu);
        fired.emplace_back(original, replayed);
        ratios.push_back(ratio);
      },
      &metrics);
  for (int i = 0; i < 9; ++i) m.submit(make_fingerprint(i));
  m.drain();
  const ConsistencyStats s = m.stats();
  EXPECT_EQ(s.checks, 9u);
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_DOUBLE_EQ(s.ratio, 8.0 / 9.0);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].first.to_json(), bad.to_json());
  EXPECT_NE(fired[0].second.sequences[0].chain_digest, bad.sequences[0].chain_digest);
  EXPECT_DOUBLE_EQ(ratios[0], 7.0 / 8.0);  // checks run in submission order: 8th of 9
  EXPECT_EQ(metrics.replay_mismatch.value(), 1u);
  EXPECT_DOUBLE_EQ(metrics.consistency_ratio.value(), 8.0 / 9.0);
}

TEST(ConsistencyMonitor, ThresholdAndMinChecksGateTheAlarm) {
  ConsistencyMonitorOptions o = all_sampled();
  o.threshold = 0.5;
  o.min_checks = 3;
  std::atomic<int> alarms{0};
  std::atomic<int> n{0};
  ConsistencyMonitor m(
      o,
      [&](const RunFingerprint& fp) {
        RunFingerprint r = fp;
        if (n++ % 2 == 0) r.sequences[1].tokens[0] ^= 1;  // every other replay differs
        return r;
      },
      [&](const RunFingerprint&, const RunFingerprint&, double) { ++alarms; });
  for (int i = 0; i < 6; ++i) {
    m.submit(make_fingerprint(i));
    m.drain();
  }
  // Mismatches at checks 1, 3, 5: ratios 0, 1/3, 2/5 -> below 0.5 from check 3 on.
  EXPECT_EQ(m.stats().mismatches, 3u);
  EXPECT_EQ(alarms.load(), 2);
  EXPECT_EQ(m.stats().alarms, 2u);
}

TEST(ConsistencyMonitor, SamplingIsADeterministicFunctionOfTheRequest) {
  ConsistencyMonitorOptions o;
  o.sample_rate = 0.25;
  auto replay = [](const RunFingerprint& fp) { return fp; };
  ConsistencyMonitor a(o, replay), b(o, replay);
  o.sampling_salt = 1;
  ConsistencyMonitor salted(o, replay);
  int in = 0, same_salted = 0;
  constexpr int kN = 400;
  for (int i = 0; i < kN; ++i) {
    RunFingerprint fp = make_fingerprint(1, 1, 2);
    fp.request.seed = static_cast<std::uint64_t>(i);
    EXPECT_EQ(a.sampled(fp), b.sampled(fp));
    fp.cache.result_cache_hit = true;  // not part of the key
    EXPECT_EQ(a.sampled(fp), b.sampled(fp));
    in += a.sampled(fp);
    same_salted += a.sampled(fp) == salted.sampled(fp);
  }
  EXPECT_GT(in, kN / 8);
  EXPECT_LT(in, kN / 2);
  EXPECT_LT(same_salted, kN);  // the salt picks another sample
  ConsistencyMonitorOptions none;
  none.sample_rate = 0;
  ConsistencyMonitor off(none, replay);
  EXPECT_FALSE(off.submit(make_fingerprint(1)));
  EXPECT_EQ(off.stats().skipped, 1u);
}

TEST(ConsistencyMonitor, BoundedQueueDropsAndErrorsAreCounted) {
  ConsistencyMonitorOptions o = all_sampled();
  o.queue_capacity = 2;
  std::mutex gate;
  gate.lock();  // holds the worker inside its first replay
  std::atomic<bool> first{true};
  ConsistencyMonitor m(o, [&](const RunFingerprint& fp) -> RunFingerprint {
    if (first.exchange(false)) {
      std::lock_guard<std::mutex> wait(gate);
    }
    if (fp.request.seed % 2 == 0) throw Error(ErrorCode::kUnavailable, "replay failed");
    return fp;
  });
  int queued = 0;
  for (int i = 0; i < 10; ++i) {
    RunFingerprint fp = make_fingerprint(1, 1, 2);
    fp.request.seed = static_cast<std::uint64_t>(i);
    queued += m.submit(fp);
    if (i == 0) {
      while (first.load()) std::this_thread::yield();  // the worker holds request 0
    }
  }
  gate.unlock();
  m.drain();
  const ConsistencyStats s = m.stats();
  // Request 0 in the worker, 1 and 2 queued, 3..9 dropped.
  EXPECT_EQ(queued, 3);
  EXPECT_EQ(s.submitted, 3u);
  EXPECT_EQ(s.dropped, 7u);
  EXPECT_EQ(s.errors, 2u);  // seeds 0 and 2 throw
  EXPECT_EQ(s.checks, 1u);
  EXPECT_EQ(s.mismatches, 0u);
}

TEST(ConsistencyMonitor, RejectsBadOptions) {
  auto replay = [](const RunFingerprint& fp) { return fp; };
  ConsistencyMonitorOptions o;
  o.sample_rate = 1.5;
  EXPECT_THROW(ConsistencyMonitor(o, replay), Error);
  o = {};
  o.threshold = -1;
  EXPECT_THROW(ConsistencyMonitor(o, replay), Error);
  o = {};
  o.queue_capacity = 0;
  EXPECT_THROW(ConsistencyMonitor(o, replay), Error);
  EXPECT_THROW(ConsistencyMonitor({}, ReplayFunction{}), Error);
}

}  // namespace
}  // namespace detinfer
