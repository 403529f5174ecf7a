// Closing an engine while a preempted request waits in the queue (docs/session.md, "KV
// admission and preemption"): the waiting request fails with kUnavailable, its observers
// see it fail once (it had run), and no KV block is left behind.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/engine_test_support.h"

namespace detinfer::testing {
namespace {

// Holds the engine thread in on_preempted of request `target` until released, and counts
// what the observers see of it.
struct HoldOnPreemption : engine::EngineObserver {
  std::uint64_t target = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool preempted = false;
  bool open = false;
  int failed = 0;
  int finished = 0;
  void on_preempted(const engine::EngineRequest& r) override {
    if (r.id != target) return;
    std::unique_lock<std::mutex> lk(mu);
    if (preempted) return;  // only the first preemption is held
    preempted = true;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
  }
  void on_failed(const engine::EngineRequest& r, const Error&) override {
    if (r.id == target) ++failed;
  }
  void on_finished(const engine::EngineRequest& r, GenerationResult&) override {
    if (r.id == target) ++finished;
  }
  void wait_preempted() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return preempted; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(EngineShutdown, PreemptedRequestWaitingInTheQueueFailsUnavailable) {
  FakeModel m;
  engine::EngineOptions o = small_options();
  o.max_batch = 16;
  o.kv_budget_bytes = 4 * 32 * 16;  // 16 blocks: three 44-token requests do not fit
  engine::Engine e(m, nullptr, o);
  auto hold = std::make_shared<HoldOnPreemption>();
  hold->target = 3;  // the youngest: the first victim
  e.add_observer(hold);
  Gate gate;
  auto fb = hold_engine(e, gate);  // the three are queued before the first admission
  GenerationConfig c;
  c.max_new_tokens = 40;
  c.ignore_eos = true;
  std::vector<std::future<GenerationResult>> fs;
  for (std::uint64_t id = 1; id <= 3; ++id) {
    engine::EngineRequest r = request({3, 4, 5, static_cast<std::int32_t>(5 + id)}, c);
    r.id = id;
    fs.push_back(e.submit(std::move(r)));
  }
  gate.release();
  fb.get();
  hold->wait_preempted();
  std::thread closer([&] { e.shutdown(); });
  // The engine thread is held in on_preempted: once submit() says the engine is closed,
  // the closer has set `stopping`, and the released engine thread stops at its next wait
  // with request 3 in the queue. (Requests accepted before that fail with the rest.)
  GenerationConfig one;
  one.max_new_tokens = 1;
  std::vector<std::future<GenerationResult>> extra;
  for (;;) {
    try {
      extra.push_back(e.submit(request({7}, one)));
    } catch (const Error& err) {
      if (err.code() == ErrorCode::kUnavailable) break;
    }
  }
  hold->release();
  closer.join();
  try {
    fs[2].get();
    ADD_FAILURE() << "the preempted request must fail";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnavailable) << err.what();
  }
  EXPECT_EQ(hold->failed, 1);
  EXPECT_EQ(hold->finished, 0);
  for (std::size_t i = 0; i < 2; ++i) {  // finished before the close, or failed by it
    try {
      EXPECT_EQ(fs[i].get().sequences.at(0).tokens.size(), 40u);
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::kUnavailable) << err.what();
    }
  }
  for (auto& f : extra) EXPECT_THROW(f.get(), Error);
  EXPECT_EQ(e.stats().kv_blocks_in_use, 0);
  EXPECT_GE(e.stats().preemptions, 1);
}

}  // namespace
}  // namespace detinfer::testing
