// The event loop of HttpServer: accepting, reading, parsing, writing and deadlines. Only
// this thread touches sockets; workers hand output over through Connection::out.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/connection.h"
#include "http/http_server_impl.h"

namespace detinfer_http {

namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerEvent = 4;
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr int kTickMs = 20;

std::string peer_address(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  }
  return buf;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

void ServerCore::loop() {
  std::vector<epoll_event> events(512);
  for (;;) {
    handle_control();
    if (stop_requested && (conns.empty() || Clock::now() >= stop_deadline)) break;
    const int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), kTickMs);
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        accept_all();
      } else if (id == kWakeId) {
        std::uint64_t v = 0;
        (void)!::read(wake_fd, &v, sizeof v);
      } else {
        on_event(id, events[i].events);
      }
    }
    process_dirty();
    check_deadlines();
  }
  // Whatever is left (the flush deadline passed): close it; running handlers see their
  // client gone.
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& kv : conns) all.push_back(kv.second);
  for (auto& c : all) close_connection(c);
  conns.clear();
}

void ServerCore::handle_control() {
  if (accepting_stopped && !listener_closed) {
    listener_closed = true;
    if (listen_fd >= 0) {
      ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
      ::close(listen_fd);
      listen_fd = -1;
    }
    // Connections between requests (or in the middle of receiving one) are closed now;
    // the others after their response.
    std::vector<std::shared_ptr<Connection>> idle;
    for (auto& [id, c] : conns) {
      std::lock_guard<std::mutex> lock(c->mu);
      if (!c->busy && c->pending() == 0 && !c->response_done) idle.push_back(c);
    }
    for (auto& c : idle) close_connection(c);
  }
  if (stop_requested && stop_deadline == Clock::time_point{}) {
    stop_deadline = Clock::now() + seconds(flush_s.load());
  }
}

void ServerCore::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd =
        ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop polling the listener for a moment instead of spinning.
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    std::string peer = peer_address(ss);
    if (accepting_stopped || conns.size() >= opt.max_connections ||
        per_peer[peer] >= opt.max_connections_per_client) {
      // Best effort: one write of a 503, then close.
      const Response r = opt.error_response(503, "too many connections");
      const std::string bytes =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + r.content_type +
          "\r\nContent-Length: " + std::to_string(r.body.size()) +
          "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + r.body;
      (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      count_response(503);
      continue;
    }
    const int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_shared<Connection>(next_id++, fd, peer, opt.limits);
    c->last_activity = Clock::now();
    ++per_peer[peer];
    ++open_connections;
    conns.emplace(c->id, c);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c->id;
    c->events = ev.events;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
}

void ServerCore::on_event(std::uint64_t id, std::uint32_t events) {
  const auto it = conns.find(id);
  if (it == conns.end()) return;
  const std::shared_ptr<Connection> c = it->second;
  if (c->fd < 0) return;
  if ((events & (EPOLLERR | EPOLLHUP)) != 0 || ((events & EPOLLRDHUP) != 0 && c->reading_paused)) {
    close_connection(c);
    return;
  }
  if ((events & (EPOLLIN | EPOLLRDHUP)) != 0) read_from(c);
  if (c->fd >= 0 && (events & EPOLLOUT) != 0) {
    flush(c);
    after_flush(c);
  }
}

void ServerCore::read_from(const std::shared_ptr<Connection>& c) {
  char buf[kReadChunk];
  for (int i = 0; i < kReadsPerEvent; ++i) {
    const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close_connection(c);  // the client closed (or reset): cancel what it asked for
      return;
    }
    if (n < 0) break;
    if (!c->lingering) c->in.append(buf, static_cast<std::size_t>(n));
    if (static_cast<std::size_t>(n) < sizeof buf) break;
  }
  if (c->lingering) return;
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    busy = c->busy || c->response_done;
  }
  if (!busy) {
    parse(c);
  } else if (c->in.size() > opt.limits.max_header_bytes + opt.limits.max_body_bytes) {
    c->reading_paused = true;  // pipelined input beyond one request: wait for the answer
    set_events(c);
  }
}

void ServerCore::parse(const std::shared_ptr<Connection>& c) {
  if (c->in.empty() || c->fd < 0) return;
  const bool was_started = c->parser.started();
  const std::size_t used = c->parser.feed(c->in);
  c->in.erase(0, used);
  if (!was_started && c->parser.started()) c->request_started = Clock::now();
  switch (c->parser.status()) {
    case RequestParser::Status::kError:
      send_error(c, c->parser.error_status(), c->parser.error_message());
      return;
    case RequestParser::Status::kNeedMore:
      if (c->parser.headers_done() && c->parser.expects_continue() && !c->continue_sent) {
        c->continue_sent = true;
        {
          std::lock_guard<std::mutex> lock(c->mu);
          c->queue_output("HTTP/1.1 100 Continue\r\n\r\n");
        }
        flush(c);
      }
      return;
    case RequestParser::Status::kComplete: {
      const bool keep_alive = c->parser.keep_alive();
      Request req = c->parser.take();
      req.peer = c->peer;
      c->continue_sent = false;
      dispatch(c, std::move(req), keep_alive);
      return;
    }
  }
}

void ServerCore::send_error(const std::shared_ptr<Connection>& c, int status,
                            const std::string& message) {
  ConnectionWriter w(c, *this, /*keep_alive=*/false, 1);
  w.respond(opt.error_response(status, message));
}

void ServerCore::flush(const std::shared_ptr<Connection>& c) {
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    while (c->fd >= 0 && c->pending() > 0) {
      const ssize_t n =
          ::send(c->fd, c->out.data() + c->out_off, c->pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c->out_off += static_cast<std::size_t>(n);
        c->last_activity = c->out_since = Clock::now();
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else if (!(n < 0 && errno == EINTR)) {
        failed = true;
        break;
      }
    }
    if (c->pending() == 0) {
      c->out.clear();
      c->out_off = 0;
    }
    c->want_out = c->pending() > 0;
  }
  if (failed) {
    close_connection(c);
    return;
  }
  set_events(c);
}

void ServerCore::after_flush(const std::shared_ptr<Connection>& c) {
  bool busy, done, close_after, gone;
  std::size_t pending;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    busy = c->busy;
    done = c->response_done;
    close_after = c->close_after;
    gone = c->gone;
    pending = c->pending();
  }
  if (gone) {
    close_connection(c);
    return;
  }
  if (c->fd < 0 || !done || pending > 0 || c->lingering) return;
  if (close_after) {
    // Lingering close: shut our side, then discard what the client still sends (a body
    // we refused) until it closes, so that it reads the answer instead of a reset.
    ::shutdown(c->fd, SHUT_WR);
    c->lingering = true;
    c->linger_until = Clock::now() + kLingerTime;
    c->in.clear();
    if (c->reading_paused) {
      c->reading_paused = false;
      set_events(c);
    }
    return;
  }
  if (busy) return;  // the handler answered but has not returned yet
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->response_done = false;
  }
  c->last_activity = Clock::now();
  if (c->reading_paused) {
    c->reading_paused = false;
    set_events(c);
  }
  parse(c);  // the next pipelined request, if one is buffered
}

void ServerCore::close_connection(const std::shared_ptr<Connection>& c) {
  if (c->fd >= 0) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
    c->fd = -1;
    const auto it = per_peer.find(c->peer);
    if (it != per_peer.end() && --it->second == 0) per_peer.erase(it);
    --open_connections;
  }
  std::function<void()> on_gone;
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->gone = true;
    on_gone.swap(c->on_gone);
    busy = c->busy;
  }
  if (on_gone) on_gone();
  // A busy connection stays known until its handler returns (process_dirty erases it).
  if (!busy) conns.erase(c->id);
}

void ServerCore::set_events(const std::shared_ptr<Connection>& c) {
  if (c->fd < 0) return;
  std::uint32_t want = EPOLLRDHUP;
  if (!c->reading_paused) want |= EPOLLIN;
  if (c->want_out) want |= EPOLLOUT;
  if (want == c->events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c->id;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
  c->events = want;
}

void ServerCore::process_dirty() {
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(dirty_mu);
    ids.swap(dirty);
  }
  for (const std::uint64_t id : ids) {
    const auto it = conns.find(id);
    if (it == conns.end()) continue;
    const std::shared_ptr<Connection> c = it->second;
    if (c->fd < 0) {
      std::lock_guard<std::mutex> lock(c->mu);
      if (!c->busy) conns.erase(id);
      continue;
    }
    flush(c);
    if (c->fd >= 0) after_flush(c);
  }
}

void ServerCore::check_deadlines() {
  const Clock::time_point now = Clock::now();
  if (accept_paused_until != Clock::time_point{} && now >= accept_paused_until && listen_fd >= 0) {
    accept_paused_until = {};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  }
  if (now < next_deadline_check) return;
  next_deadline_check = now + std::chrono::milliseconds(kTickMs);
  std::vector<std::shared_ptr<Connection>> expired, timed_out;
  const DeadlineLimits limits{seconds(opt.request_timeout_s), seconds(opt.keep_alive_timeout_s),
                              seconds(opt.write_timeout_s)};
  for (auto& [id, c] : conns) {
    switch (deadline_action(*c, now, limits, stop_requested)) {
      case DeadlineAction::kClose:
        expired.push_back(c);
        break;
      case DeadlineAction::kRequestTimeout:
        timed_out.push_back(c);
        break;
      case DeadlineAction::kNone:
        break;
    }
  }
  for (auto& c : expired) close_connection(c);
  for (auto& c : timed_out) {
    send_error(
        c, 408,
        "the request was not received within " + std::to_string(opt.request_timeout_s) + " s");
  }
}

}  // namespace detinfer_http
