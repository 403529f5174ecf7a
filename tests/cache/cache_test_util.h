// Shared helpers of the cache tests: a fake clock, temporary directories, deterministic
// payloads and a real redis-server child process on a free loopback port.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_store.h"
#include "cache/cache_clock.h"
#include "detinfer/hash.h"

namespace detinfer::testing {

class FakeClock final : public cache::CacheClock {
 public:
  std::int64_t now_ms() const override { return now_.load(); }
  void advance_ms(std::int64_t ms) { now_ += ms; }
  void advance_s(double s) { now_ += static_cast<std::int64_t>(s * 1000.0); }

 private:
  std::atomic<std::int64_t> now_{1000000};
};

// A fresh directory under DETINFER_TEST_TMP (or /tmp), removed at destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("DETINFER_TEST_TMP");
    std::string root = base != nullptr ? base : "/tmp";
    ::mkdir(root.c_str(), 0755);
    std::string tmpl = root + "/cache-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data()) != nullptr ? std::string(buf.data()) : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Non-zero pseudo-random bytes determined by (seed, size): the expected content of a
// block can be recomputed from its key.
inline cache::BytesPtr make_payload(std::uint64_t seed, std::size_t size) {
  auto b = std::make_shared<cache::Bytes>(size);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x1234567;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (*b)[i] = static_cast<std::uint8_t>(x | 1);
  }
  return b;
}

inline Hash128 test_key(std::uint64_t i) { return xxh3_128(&i, sizeof i, 99); }

// The skip reason of Redis tests in a build without hiredis (DETINFER_WITH_REDIS=OFF):
// there, enabling a Redis tier is Error(kUnsupported) (redis_unavailable_test.cpp).
constexpr const char* kBuiltWithoutRedis =
    "built with DETINFER_WITH_REDIS=OFF: the Redis tiers are unsupported";

inline std::string find_redis_server() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

inline bool port_accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// redis-server as a child process (no persistence), killed at destruction.
class RedisServer {
 public:
  explicit RedisServer(std::string binary) : binary_(std::move(binary)) {}
  ~RedisServer() { kill(); }

  // Starts on `port` (a free one when 0); true once it accepts connections.
  bool start(int port = 0) {
    if (port == 0) port = free_loopback_port();
    port_ = port;
    const std::string port_s = std::to_string(port);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execl(binary_.c_str(), binary_.c_str(), "--port", port_s.c_str(), "--bind", "127.0.0.1",
              "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", "/tmp",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (port_accepts(port)) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // SIGKILL, as a crash would.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  int port() const { return port_; }

 private:
  std::string binary_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace detinfer::testing
