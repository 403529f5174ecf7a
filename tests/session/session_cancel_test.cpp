// Cancelled requests give everything back at once (issue 33, item 4): after a cancelled
// handle resolves, stats() and the /metrics gauges show no KV blocks in use and an empty
// queue, and the request is counted once in detinfer_requests_total{finish_reason=
// "cancelled"}, whether it was cancelled while queued, while streaming or by its token
// callback. No sleeps: the engine thread is held in a token callback while the test
// cancels.
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::metric;
using testing::tiny_model_dir;
using testing::tiny_options;

const std::string kCancelled = "detinfer_requests_total{finish_reason=\"cancelled\"}";

GenerationConfig long_config() {
  GenerationConfig c;
  c.max_new_tokens = 200;
  c.ignore_eos = true;
  return c;
}

// A token callback that, on its first call, reports that it runs and then waits until the
// test lets it go: the engine thread is held there meanwhile.
struct Hold {
  std::promise<void> entered;
  std::promise<void> go;
  std::shared_future<void> go_f = go.get_future().share();
  bool first = true;
  TokenCallback callback() {
    return [this](const TokenEvent&) {
      if (first) {
        first = false;
        entered.set_value();
        go_f.wait();
      }
      return true;
    };
  }
};

void expect_idle(DeterministicSession& s) {
  const SessionStats st = s.stats();
  EXPECT_EQ(st.queued, 0);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.kv_blocks_in_use, 0);
  const std::string m = s.metrics_text();
  EXPECT_EQ(metric(m, "detinfer_queue_depth"), 0);
  EXPECT_EQ(metric(m, "detinfer_kv_blocks_in_use"), 0);
}

TEST(SessionCancel, QueuedRequestIsDroppedAtOnceAndCountedOnce) {
  SessionOptions o = tiny_options();
  o.max_batch = 1;  // the second request waits while the first runs
  auto s = DeterministicSession::open(tiny_model_dir(), o);
  GenerationConfig short_config;
  short_config.max_new_tokens = 4;
  short_config.ignore_eos = true;
  Hold hold;
  RequestHandle first = s.submit("first", short_config, hold.callback());
  hold.entered.get_future().wait();
  RequestHandle queued = s.submit("second", long_config());
  EXPECT_EQ(s.stats().queued, 1);
  queued.cancel();
  EXPECT_EQ(s.stats().queued, 0);  // the slot is free before the engine moves on
  queued.cancel();
  hold.go.set_value();
  const GenerationResult r = queued.get();
  EXPECT_EQ(r.sequences.at(0).finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(r.sequences[0].tokens.empty());
  EXPECT_EQ(metric(s.metrics_text(), "detinfer_queue_depth"), 0);
  EXPECT_EQ(first.get().sequences[0].tokens.size(), 4u);
  expect_idle(s);
  EXPECT_EQ(metric(s.metrics_text(), kCancelled), 1);
}

TEST(SessionCancel, StreamedRequestReleasesItsBlocksBeforeItsHandleResolves) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  Hold hold;
  RequestHandle h = s.submit("a client that goes away", long_config(), hold.callback());
  hold.entered.get_future().wait();
  EXPECT_GT(s.stats().kv_blocks_in_use, 0);
  h.cancel();  // what the server does when the connection drops
  hold.go.set_value();
  const GenerationResult r = h.get();
  EXPECT_EQ(r.sequences.at(0).finish_reason, FinishReason::kCancelled);
  EXPECT_LT(r.sequences[0].tokens.size(), 200u);
  // No other request follows: the session is idle and must say so now.
  expect_idle(s);
  EXPECT_EQ(metric(s.metrics_text(), kCancelled), 1);
  h.cancel();  // after the end: no second count
  EXPECT_EQ(metric(s.metrics_text(), kCancelled), 1);
}

TEST(SessionCancel, CallbackCancelReleasesItsBlocksBeforeTheResultIsReturned) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  int n = 0;
  const GenerationResult r =
      s.generate("stop after three", long_config(), [&](const TokenEvent&) { return ++n < 3; });
  EXPECT_EQ(r.sequences.at(0).finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(r.sequences[0].tokens.size(), 3u);
  expect_idle(s);
  EXPECT_EQ(metric(s.metrics_text(), kCancelled), 1);
}

}  // namespace
}  // namespace detinfer
