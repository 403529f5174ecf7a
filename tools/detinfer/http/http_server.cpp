#include "http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "detinfer/error.h"
#include "http/http_server_impl.h"

namespace detinfer_http {

namespace {

Response default_error(int status, const std::string& message) {
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = message + "\n";
  return r;
}

}  // namespace

void WorkerPool::start(int n) {
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
}

void WorkerPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void WorkerPool::join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return done_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

ServerCore::ServerCore(ServerOptions o, Handler h) : opt(std::move(o)), handler(std::move(h)) {
  if (!opt.error_response) opt.error_response = default_error;
}

ServerCore::~ServerCore() {
  if (listen_fd >= 0) ::close(listen_fd);
  if (epoll_fd >= 0) ::close(epoll_fd);
  if (wake_fd >= 0) ::close(wake_fd);
}

void ServerCore::notify(std::uint64_t id) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(dirty_mu);
    first = dirty.empty();
    dirty.push_back(id);
  }
  if (first) wake();
}

void ServerCore::wake() {
  const std::uint64_t one = 1;
  (void)!::write(wake_fd, &one, sizeof one);
}

struct HttpServer::Impl : ServerCore {
  using ServerCore::ServerCore;
};

HttpServer::HttpServer(ServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}
HttpServer::~HttpServer() = default;

int HttpServer::bind() { return impl_->bind_socket(); }

void HttpServer::stop_accepting() {
  impl_->accepting_stopped = true;
  impl_->wake();
}

void HttpServer::stop(double flush_s) {
  impl_->flush_s = flush_s;
  impl_->accepting_stopped = true;
  impl_->stop_requested = true;
  impl_->wake();
}

std::size_t HttpServer::in_flight() const { return impl_->in_flight.load(); }
std::size_t HttpServer::connections() const { return impl_->open_connections.load(); }

int ServerCore::bind_socket() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(opt.port);
  const auto cannot = [&](const std::string& why) {
    return detinfer::Error(detinfer::ErrorCode::kUnavailable,
                           "cannot listen on " + opt.host + ":" + port + ": " + why);
  };
  if (::getaddrinfo(opt.host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    throw cannot("unknown address");
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) throw cannot(std::strerror(errno));
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  listen_fd = fd;
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) throw cannot("epoll/eventfd failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.u64 = kWakeId;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                        : reinterpret_cast<sockaddr_in&>(ss).sin_port);
}

void HttpServer::run() {
  if (impl_->listen_fd < 0) bind();
  impl_->workers.start(impl_->opt.worker_threads);
  if (impl_->has_quick()) impl_->quick_workers.start(impl_->opt.quick_threads);
  impl_->loop();
  impl_->workers.join();
  impl_->quick_workers.join();
}

}  // namespace detinfer_http

namespace detinfer_http {

void ServerCore::dispatch(const std::shared_ptr<Connection>& c, Request req, bool keep_alive) {
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->busy = true;
    c->response_done = false;
  }
  ++in_flight;
  auto shared = std::make_shared<Request>(std::move(req));
  (has_quick() && opt.is_quick(*shared) ? quick_workers : workers)
      .post([this, c, shared, keep_alive] { run_handler(c, *shared, keep_alive); });
}

void ServerCore::run_handler(const std::shared_ptr<Connection>& c, const Request& req,
                             bool keep_alive) {
  ConnectionWriter w(c, *this, keep_alive, req.version_minor);
  w.set_head_only(req.method == "HEAD");
  bool gone = false;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    gone = c->gone;
  }
  if (!gone) {  // a request queued while its client left is not worth running
    try {
      handler(req, w);
    } catch (const std::exception& e) {
      if (!w.answered()) w.respond(opt.error_response(500, e.what()));
    } catch (...) {
      if (!w.answered()) w.respond(opt.error_response(500, "unknown error"));
    }
    if (!w.answered()) {
      w.respond(opt.error_response(500, "the handler sent no response"));
    } else if (w.streaming()) {
      w.finish();
    }
  } else if (opt.on_abandoned) {
    try {
      opt.on_abandoned(req);
    } catch (...) {  // metrics only: never fatal to the worker
    }
  }
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->busy = false;
    c->on_gone = nullptr;
  }
  --in_flight;
  notify(c->id);
}

}  // namespace detinfer_http
