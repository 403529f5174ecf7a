// One client connection of HttpServer (internal). The event loop owns the socket, the
// parser and the input; the fields under `mu` are shared with the worker that runs the
// connection's current request.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/http_message.h"
#include "http/request_parser.h"

namespace detinfer_http {

using Clock = std::chrono::steady_clock;

struct Connection {
  Connection(std::uint64_t id_, int fd_, std::string peer_, const HttpLimits& limits)
      : id(id_), fd(fd_), peer(std::move(peer_)), parser(limits) {}

  const std::uint64_t id;
  // Event-loop only.
  int fd;  // -1 once closed
  std::string peer;
  RequestParser parser;
  std::string in;                       // received bytes not parsed yet (pipelined requests)
  Clock::time_point request_started{};  // first byte of the request being read
  Clock::time_point last_activity{};    // last read or write progress
  bool continue_sent = false;
  bool reading_paused = false;  // EPOLLIN off: too much pipelined input while busy
  bool lingering = false;       // error sent, write side shut: discarding input until EOF
  bool want_out = false;        // output pending: EPOLLOUT wanted
  std::uint32_t events = 0;     // the epoll mask registered now
  Clock::time_point linger_until{};

  // Shared with the worker (under mu).
  std::mutex mu;
  std::string out;
  std::size_t out_off = 0;
  bool busy = false;           // a request is with a handler
  bool response_done = false;  // the handler's response is complete (in `out`)
  bool close_after = false;    // close once `out` is written
  bool gone = false;           // the client went away (or we dropped it)
  std::function<void()> on_gone;
  // The write timeout's clock: when the unsent output last made progress, or was queued
  // while none was pending. Not last_activity: a handler may work for minutes before its
  // first byte, and that byte has not stalled.
  Clock::time_point out_since{};

  std::size_t pending() const { return out.size() - out_off; }
  // Appends output (under mu), starting the write clock when none was pending.
  void queue_output(const std::string& bytes);
};

// What the event loop's deadline check does with a connection (HttpServer's limits).
enum class DeadlineAction : std::uint8_t { kNone, kClose, kRequestTimeout };
struct DeadlineLimits {
  Clock::duration request, keep_alive, write;
};
// The decision for connection `c` at `now` (reads the shared fields under c.mu):
//   lingering: close at linger_until; unsent output: close after `write` without progress
//   (out_since); a handler running or its answer complete: nothing; a request being read:
//   408 after `request` from its first byte; an idle connection: close after `keep_alive`
//   since last_activity, or at once when `stopping`.
DeadlineAction deadline_action(Connection& c, Clock::time_point now, const DeadlineLimits& limits,
                               bool stopping);

// What HttpServer offers a writer: wake the loop to flush a connection.
class WriterHost {
 public:
  virtual ~WriterHost() = default;
  virtual void notify(std::uint64_t connection_id) = 0;
  virtual bool shutting_down() const = 0;
  virtual std::size_t max_pending_output() const = 0;
  virtual void count_response(int status) = 0;
};

// The ResponseWriter of one request.
class ConnectionWriter : public ResponseWriter {
 public:
  ConnectionWriter(std::shared_ptr<Connection> c, WriterHost& host, bool keep_alive,
                   int version_minor)
      : c_(std::move(c)), host_(host), keep_alive_(keep_alive), version_minor_(version_minor) {}

  void respond(Response response) override;
  bool start_stream(int status, const std::string& content_type, const Headers& headers) override;
  bool write(std::string_view chunk) override;
  void finish() override;
  bool client_gone() const override;
  void on_client_gone(std::function<void()> callback) override;

  // A response to a HEAD request: respond() sends the head only (with the Content-Length
  // of the body a GET would get, RFC 9110 9.3.2).
  void set_head_only(bool head_only) { head_only_ = head_only; }

  bool answered() const { return state_ != State::kNone; }
  bool streaming() const { return state_ == State::kStreaming; }

 private:
  enum class State : std::uint8_t { kNone, kStreaming, kDone };
  // Appends bytes to the connection's output; `last` marks the response complete.
  bool append(const std::string& bytes, bool last);
  std::string head(int status, const std::string& content_type, const Headers& headers,
                   const std::string* length_of) const;

  std::shared_ptr<Connection> c_;
  WriterHost& host_;
  bool keep_alive_;
  int version_minor_;
  State state_ = State::kNone;
  bool head_only_ = false;
};

}  // namespace detinfer_http
