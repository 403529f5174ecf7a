// A raw TCP HTTP/1.1 client for tests that must behave like hostile or unusual clients:
// trickling bytes, lying about lengths, pipelining, leaving mid-request. Every read has a
// deadline (poll), so a test never hangs on a silent server.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

namespace detinfer::testing {

struct RawResponse {
  int status = -1;  // -1: no complete response before the deadline or the close
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
};

class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    const int yes = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  }
  ~RawConn() { close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Sends everything; false when the server closed or reset the connection.
  bool send(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

  // True when the server closed the connection (EOF or reset) within `timeout_s`;
  // bytes that arrive meanwhile are kept for read_response().
  bool closed_by_server(double timeout_s) {
    const auto deadline = clock::now() + ms(timeout_s);
    while (clock::now() < deadline) {
      const int r = fill(deadline);
      if (r <= 0) return r == 0 || r == -2;
    }
    return false;
  }

  // Reads the head of a response to a HEAD request (no body follows, whatever its
  // Content-Length says) within `timeout_s`.
  RawResponse read_head_response(double timeout_s = 10) {
    const auto deadline = clock::now() + ms(timeout_s);
    RawResponse r;
    std::size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (fill(deadline) <= 0) return r;
    }
    parse_head(buf_.substr(0, head_end), r);
    buf_.erase(0, head_end + 4);
    return r;
  }

  // Reads one response (Content-Length or chunked) within `timeout_s`.
  RawResponse read_response(double timeout_s = 10) {
    const auto deadline = clock::now() + ms(timeout_s);
    RawResponse r;
    std::size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (fill(deadline) <= 0) return r;
    }
    const std::string head = buf_.substr(0, head_end);
    buf_.erase(0, head_end + 4);
    parse_head(head, r);
    if (r.status == 100) return read_response(timeout_s);  // interim: the real one follows
    if (r.headers.count("transfer-encoding")) {
      for (;;) {
        std::size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos) {
          if (fill(deadline) <= 0) return RawResponse{};
        }
        const std::size_t size = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2) {
          if (fill(deadline) <= 0) return RawResponse{};
        }
        r.body += buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) return r;
      }
    }
    const std::size_t len = r.headers.count("content-length")
                                ? std::strtoul(r.headers["content-length"].c_str(), nullptr, 10)
                                : 0;
    while (buf_.size() < len) {
      if (fill(deadline) <= 0) return RawResponse{};
    }
    r.body = buf_.substr(0, len);
    buf_.erase(0, len);
    return r;
  }

 private:
  using clock = std::chrono::steady_clock;
  static clock::duration ms(double s) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
  }
  // Reads what is available before `deadline`: >0 bytes read, 0 EOF, -1 timeout, -2 error.
  int fill(clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0 || fd_ < 0) return -1;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return -1;
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n < 0) return -2;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return static_cast<int>(n);
  }
  static void parse_head(const std::string& head, RawResponse& r) {
    const std::size_t sp = head.find(' ');
    r.status = sp == std::string::npos ? -1 : std::atoi(head.c_str() + sp + 1);
    std::size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos + 2 < head.size()) {
      const std::size_t next = head.find("\r\n", pos + 2);
      const std::string line =
          head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      pos = next;
    }
  }

  int fd_ = -1;
  std::string buf_;
};

// "POST path HTTP/1.1" with Host, Content-Type: application/json and Content-Length.
inline std::string post_request(const std::string& path, const std::string& body,
                                const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline std::string get_request(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
}

}  // namespace detinfer::testing
