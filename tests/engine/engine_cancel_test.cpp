// Cancellation through Engine::canceller (issue 33, item 4): a cancelled request gives back
// its queue slot and KV blocks, the observers' gauges are exact by the time its future is
// ready, and it is counted once (on_abandoned before admission, on_finished after). No
// sleeps: the engine thread is held in a token callback (Gate) or in an observer while
// the test cancels. Labelled tsan: these run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "engine/engine.h"
#include "engine/engine_test_support.h"
#include "engine/fake_model.h"

namespace detinfer {
namespace {

using engine::Engine;
using engine::EngineObserver;
using engine::EngineOptions;
using engine::EngineRequest;
using engine::EngineStats;
using engine::StepStats;
using testing::FakeModel;
using testing::Gate;
using testing::request;
using testing::small_options;

// The last gauges the engine reported (on_step or on_gauges) and the cancelled counts.
struct Recorder : EngineObserver {
  std::atomic<std::int64_t> queue_depth{-1};
  std::atomic<std::int64_t> blocks_in_use{-1};
  std::atomic<int> abandoned{0};
  std::atomic<int> finished_cancelled{0};
  void on_step(const StepStats& s) override { on_gauges(s); }
  void on_gauges(const StepStats& s) override {
    queue_depth.store(s.queue_depth);
    blocks_in_use.store(s.kv_blocks_in_use);
  }
  void on_abandoned(const EngineRequest&) override { ++abandoned; }
  void on_finished(const EngineRequest&, GenerationResult& r) override {
    if (r.sequences.at(0).finish_reason == FinishReason::kCancelled) ++finished_cancelled;
  }
};

// Holds the engine thread in the first step that decodes, until released.
struct StepGate : EngineObserver {
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;
  bool open = false;
  void on_step(const StepStats& s) override {
    if (s.decode_sequences == 0) return;
    std::unique_lock<std::mutex> lk(mu);
    held = true;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
  }
  void wait_held() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return held; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

GenerationConfig long_config() {
  GenerationConfig c;
  c.max_new_tokens = 60;
  c.ignore_eos = true;
  return c;
}

void expect_idle(const Engine& e, const Recorder& rec) {
  const EngineStats s = e.stats();
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_in_use, 0);
  EXPECT_EQ(rec.queue_depth.load(), 0);
  EXPECT_EQ(rec.blocks_in_use.load(), 0);
}

TEST(EngineCancel, QueuedRequestLeavesTheQueueAtOnceAndIsCountedOnce) {
  FakeModel m;
  EngineOptions o = small_options();
  o.max_batch = 1;  // the second request waits while the first runs
  Engine e(m, nullptr, o);
  auto rec = std::make_shared<Recorder>();
  e.add_observer(rec);
  GenerationConfig c;
  c.max_new_tokens = 3;
  Gate gate;
  EngineRequest blocker = request({7, 8}, c);
  blocker.on_token = gate.callback();
  auto fb = e.submit(blocker);
  gate.wait_entered();  // the engine thread is inside the blocker's callback
  EngineRequest waiting = request({9, 10, 11}, long_config());
  const std::function<void()> cancel = e.canceller(waiting.cancelled);
  auto fw = e.submit(waiting);
  EXPECT_EQ(e.stats().queued, 1);
  cancel();
  EXPECT_EQ(e.stats().queued, 0);  // the slot is free before the engine thread moves
  cancel();                        // twice: still one cancelled request
  gate.release();
  const GenerationResult r = fw.get();
  ASSERT_EQ(r.sequences.size(), 1u);
  EXPECT_EQ(r.sequences[0].finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(r.sequences[0].tokens.empty());
  EXPECT_EQ(rec->queue_depth.load(), 0);  // reported before the future was ready
  EXPECT_EQ(fb.get().sequences[0].tokens.size(), 3u);
  expect_idle(e, *rec);
  EXPECT_EQ(rec->abandoned.load(), 1);
  EXPECT_EQ(rec->finished_cancelled.load(), 0);
}

TEST(EngineCancel, StreamedRequestReleasesItsBlocksBeforeItsFutureIsReady) {
  FakeModel m;
  Engine e(m, nullptr, small_options());
  auto rec = std::make_shared<Recorder>();
  e.add_observer(rec);
  Gate gate;
  EngineRequest r = request({3, 4, 5, 6, 7, 8, 9}, long_config());
  r.on_token = gate.callback();
  const std::function<void()> cancel = e.canceller(r.cancelled);
  auto f = e.submit(r);
  gate.wait_entered();
  EXPECT_GT(e.stats().kv_blocks_in_use, 0);
  cancel();  // as a server does when the client goes away
  gate.release();
  const GenerationResult out = f.get();
  EXPECT_EQ(out.sequences[0].finish_reason, FinishReason::kCancelled);
  EXPECT_FALSE(out.sequences[0].tokens.empty());
  EXPECT_LT(out.sequences[0].tokens.size(), 60u);
  // Nothing else ever runs: the engine is idle and the gauges must already say so.
  expect_idle(e, *rec);
  EXPECT_EQ(rec->finished_cancelled.load(), 1);
  EXPECT_EQ(rec->abandoned.load(), 0);
  cancel();  // after the end: nothing changes
  EXPECT_EQ(rec->finished_cancelled.load(), 1);
}

TEST(EngineCancel, NonStreamedRunningRequestReleasesItsBlocksBeforeItsFutureIsReady) {
  FakeModel m;
  Engine e(m, nullptr, small_options());
  auto rec = std::make_shared<Recorder>();
  auto step_gate = std::make_shared<StepGate>();
  e.add_observer(rec);
  e.add_observer(step_gate);
  EngineRequest r = request({5, 6, 7}, long_config());
  const std::function<void()> cancel = e.canceller(r.cancelled);
  auto f = e.submit(r);
  step_gate->wait_held();  // it has decoded a token and is held after that step
  cancel();
  step_gate->release();
  const GenerationResult out = f.get();
  EXPECT_EQ(out.sequences[0].finish_reason, FinishReason::kCancelled);
  EXPECT_LT(out.sequences[0].tokens.size(), 60u);
  expect_idle(e, *rec);
  EXPECT_EQ(rec->finished_cancelled.load(), 1);
  EXPECT_EQ(rec->abandoned.load(), 0);
}

TEST(EngineCancel, CancellerOutlivesTheEngine) {
  std::function<void()> cancel;
  {
    FakeModel m;
    Engine e(m, nullptr, small_options());
    EngineRequest r = request({5, 6}, long_config());
    cancel = e.canceller(r.cancelled);
    e.submit(r).get();
  }
  cancel();  // the engine is gone: only the flag is set
}

}  // namespace
}  // namespace detinfer
