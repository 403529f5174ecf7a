// The deadlines of one HttpServer connection (tools/detinfer/http/connection.h), decided by
// deadline_action at chosen instants: no sockets, no sleeps. The regression it guards: a
// handler that worked longer than the write timeout (a 2048-token completion takes minutes)
// queued its whole response, and a deadline check that ran before the event loop flushed
// it measured the write timeout from the request's last read, closed the connection and
// dropped the answer (found by scripts/load_test.py: 2 of 64 requests got the connection
// closed without a response).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "http/connection.h"

namespace detinfer_http {
namespace {

using std::chrono::seconds;

// A host that never flushes: the output stays queued, as between a worker's append and
// the event loop's next flush.
class QueueOnlyHost : public WriterHost {
 public:
  void notify(std::uint64_t) override {}
  bool shutting_down() const override { return false; }
  std::size_t max_pending_output() const override { return 1u << 20; }
  void count_response(int) override {}
};

const DeadlineLimits kLimits{seconds(10), seconds(30), seconds(30)};

std::shared_ptr<Connection> busy_connection(Clock::time_point last_read) {
  auto c = std::make_shared<Connection>(1, /*fd=*/7, "127.0.0.1", HttpLimits{});
  c->last_activity = last_read;
  c->busy = true;  // the request is with a handler
  return c;
}

Response text(std::string body) {
  Response r;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

TEST(HttpConnection, ALongHandlersResponseIsNotTimedOutBeforeItsFirstWrite) {
  const Clock::time_point read_at = Clock::now() - std::chrono::hours(1);
  auto c = busy_connection(read_at);
  QueueOnlyHost host;
  EXPECT_EQ(deadline_action(*c, Clock::now(), kLimits, false), DeadlineAction::kNone)
      << "a handler at work has no deadline";
  ConnectionWriter w(c, host, /*keep_alive=*/true, 1);
  w.respond(text("an hour of work"));
  const Clock::time_point queued = Clock::now();
  EXPECT_GT(c->pending(), 0u);
  EXPECT_EQ(deadline_action(*c, queued, kLimits, false), DeadlineAction::kNone)
      << "the response was queued just now: the write timeout starts there, not at the read";
  EXPECT_EQ(deadline_action(*c, queued + seconds(29), kLimits, false), DeadlineAction::kNone);
  EXPECT_EQ(deadline_action(*c, queued + seconds(31), kLimits, false), DeadlineAction::kClose)
      << "output that makes no progress for the write timeout is still dropped";
}

TEST(HttpConnection, AStreamsLaterChunksKeepTheClockOfTheUnsentOutput) {
  auto c = busy_connection(Clock::now() - std::chrono::hours(1));
  QueueOnlyHost host;
  ConnectionWriter w(c, host, true, 1);
  ASSERT_TRUE(w.start_stream(200, "text/event-stream", {}));
  const Clock::time_point first = Clock::now();
  // More chunks behind unsent output do not restart the clock: the client is not reading.
  ASSERT_TRUE(w.write("data: 1\n\n"));
  EXPECT_EQ(deadline_action(*c, first + seconds(29), kLimits, false), DeadlineAction::kNone);
  EXPECT_EQ(deadline_action(*c, first + seconds(31), kLimits, false), DeadlineAction::kClose);
}

TEST(HttpConnection, RequestKeepAliveAndLingerDeadlines) {
  const Clock::time_point t0 = Clock::now();
  auto idle = std::make_shared<Connection>(2, 8, "127.0.0.1", HttpLimits{});
  idle->last_activity = t0;
  EXPECT_EQ(deadline_action(*idle, t0 + seconds(29), kLimits, false), DeadlineAction::kNone);
  EXPECT_EQ(deadline_action(*idle, t0 + seconds(31), kLimits, false), DeadlineAction::kClose);
  EXPECT_EQ(deadline_action(*idle, t0, kLimits, /*stopping=*/true), DeadlineAction::kClose);

  auto reading = std::make_shared<Connection>(3, 9, "127.0.0.1", HttpLimits{});
  reading->in = "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
  reading->in.erase(0, reading->parser.feed(reading->in));
  ASSERT_TRUE(reading->parser.started());
  reading->request_started = t0;
  EXPECT_EQ(deadline_action(*reading, t0 + seconds(9), kLimits, false), DeadlineAction::kNone);
  EXPECT_EQ(deadline_action(*reading, t0 + seconds(11), kLimits, false),
            DeadlineAction::kRequestTimeout);

  idle->lingering = true;
  idle->linger_until = t0 + seconds(2);
  EXPECT_EQ(deadline_action(*idle, t0 + seconds(1), kLimits, false), DeadlineAction::kNone);
  EXPECT_EQ(deadline_action(*idle, t0 + seconds(3), kLimits, false), DeadlineAction::kClose);

  idle->fd = -1;  // closed: nothing left to decide
  EXPECT_EQ(deadline_action(*idle, t0 + seconds(3), kLimits, false), DeadlineAction::kNone);
}

}  // namespace
}  // namespace detinfer_http
