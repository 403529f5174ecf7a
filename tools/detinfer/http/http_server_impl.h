// Internals of HttpServer shared by http_server.cpp (setup, workers) and
// http_event_loop.cpp (the loop).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/connection.h"
#include "http/http_server.h"

namespace detinfer_http {

constexpr std::uint64_t kListenId = 0;
constexpr std::uint64_t kWakeId = 1;

// Worker pool: handlers run here, never on the event loop.
class WorkerPool {
 public:
  void start(int n);
  void post(std::function<void()> job);
  void join();  // runs what is queued, then stops

 private:
  void work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool done_ = false;
};

struct ServerCore : WriterHost {
  ServerCore(ServerOptions o, Handler h);
  ~ServerCore() override;

  // WriterHost
  void notify(std::uint64_t id) override;
  bool shutting_down() const override { return accepting_stopped.load(); }
  std::size_t max_pending_output() const override { return opt.max_pending_output; }
  void count_response(int status) override {
    if (opt.on_response) opt.on_response(status);
  }
  void wake();

  int bind_socket();
  void loop();
  void accept_all();
  void on_event(std::uint64_t id, std::uint32_t events);
  void read_from(const std::shared_ptr<Connection>& c);
  void parse(const std::shared_ptr<Connection>& c);
  void dispatch(const std::shared_ptr<Connection>& c, Request req, bool keep_alive);
  void run_handler(const std::shared_ptr<Connection>& c, const Request& req, bool keep_alive);
  void send_error(const std::shared_ptr<Connection>& c, int status, const std::string& message);
  void flush(const std::shared_ptr<Connection>& c);
  void after_flush(const std::shared_ptr<Connection>& c);
  void close_connection(const std::shared_ptr<Connection>& c);
  void set_events(const std::shared_ptr<Connection>& c);
  void process_dirty();
  void check_deadlines();
  void handle_control();

  ServerOptions opt;
  Handler handler;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> conns;
  std::unordered_map<std::string, std::size_t> per_peer;
  std::uint64_t next_id = 2;
  WorkerPool workers;
  WorkerPool quick_workers;  // ServerOptions::is_quick's requests
  bool has_quick() const { return opt.is_quick && opt.quick_threads > 0; }
  Clock::time_point accept_paused_until{};
  Clock::time_point next_deadline_check{};

  std::mutex dirty_mu;
  std::vector<std::uint64_t> dirty;

  std::atomic<bool> accepting_stopped{false};
  std::atomic<bool> stop_requested{false};
  bool listener_closed = false;
  Clock::time_point stop_deadline{};
  std::atomic<double> flush_s{1.0};
  std::atomic<std::size_t> in_flight{0};
  std::atomic<std::size_t> open_connections{0};
};

}  // namespace detinfer_http
