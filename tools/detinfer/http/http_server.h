// A small event-driven HTTP/1.1 server (epoll, Linux): one thread owns every socket and
// only moves bytes; handlers run on a pool of worker threads. A slow or silent client
// costs a buffer bounded by the limits, never a thread, and every phase has a deadline:
//   - reading a request (headers and body): absolute, from its first byte;
//   - idle keep-alive between requests;
//   - writing: no progress on pending output.
// Pipelined requests are answered in order, one at a time per connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "http/http_message.h"
#include "http/request_parser.h"

namespace detinfer_http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HttpLimits limits;
  std::size_t max_connections = 4096;             // open at once (503 + close above)
  std::size_t max_connections_per_client = 1024;  // open at once from one address
  double request_timeout_s = 10;                  // first byte of a request to its last (408 after)
  double keep_alive_timeout_s = 30;               // idle connection between requests (closed after)
  double write_timeout_s = 30;  // pending output that makes no progress (closed after)
  std::size_t max_pending_output = 16u << 20;  // a stream is dropped above this unsent
  int worker_threads = 64;                     // handlers running at once
  // Requests this picks (health, metrics: cheap and answered at once) run on
  // `quick_threads` workers of their own, so that they never wait behind `worker_threads`
  // long handlers (a scrape during 64 concurrent minute-long completions). Unset: none.
  std::function<bool(const Request& request)> is_quick;
  int quick_threads = 2;
  // Body of transport-level errors (400, 408, 413, 431, ...): the application's error
  // shape. Default: text/plain with the message.
  std::function<Response(int status, const std::string& message)> error_response;
  // Called with the status of every response sent (for metrics).
  std::function<void(int status)> on_response;
  // Called (on a worker, once) for a request whose client went away while it waited for
  // a free worker: its handler never runs and nothing is answered (for metrics: the
  // application counts what it would have cancelled).
  std::function<void(const Request& request)> on_abandoned;
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (backlog SOMAXCONN); returns the port. Throws detinfer::Error
  // (kUnavailable) when the address cannot be bound.
  int bind();
  // Runs the event loop and the workers until stop() has drained (call bind() first).
  void run();

  // Thread-safe. Stops accepting: closes the listening socket and idle connections;
  // connections with a request in progress are closed after their response.
  void stop_accepting();
  // Thread-safe. Ends run(): responses already produced get up to `flush_s` seconds to
  // be written, then every connection is closed (handlers still running see their
  // client gone) and run() returns once the workers are done.
  void stop(double flush_s = 1.0);
  // Requests whose handler has not finished its response yet.
  std::size_t in_flight() const;
  // Connections open now.
  std::size_t connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace detinfer_http
