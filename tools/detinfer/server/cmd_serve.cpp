// `detinfer serve`: an OpenAI-compatible HTTP server over one DeterministicSession.
// Every request goes through the same session, so concurrent requests are batched
// together — and stay bitwise reproducible in canonical mode. The transport is
// http/http_server.h (epoll, limits and deadlines); the routes are serve_app.h.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "command_registry.h"
#include "core/memory_limits.h"
#include "detinfer/error.h"
#include "detinfer/session.h"
#include "generation_flags.h"
#include "http/http_server.h"
#include "serve_app.h"
#include "serve_auth.h"
#include "serve_policy.h"
#include "serve_runtime.h"
#include "session_flags.h"

namespace {

struct ServeOptions {
  std::string model;
  std::string model_name;  // default: the folder's name
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string port_file;                // written with the bound port (useful with --port 0)
  detinfer_cli::ToolConfig config;      // session options and policies (session_flags.h)
  std::uint64_t inject_mismatches = 0;  // testing: synthetic failed consistency checks
  std::shared_ptr<detinfer_cli::SessionFlags> flags;
  std::int32_t http_threads = 64;  // requests handled at once (worker threads)
  detinfer_http::HttpLimits limits;
  std::size_t max_connections = 4096;
  std::size_t max_connections_per_client = 1024;
  double request_timeout_s = 10;
  double keep_alive_timeout_s = 30;
  double write_timeout_s = 30;
  std::vector<std::string> cors_origins;  // empty: CORS off
  double shutdown_timeout_s = 10.0;
  std::vector<std::string> api_keys;           // --api-key (repeatable; serve_auth.h)
  detinfer_cli::SpeculativeFlags speculative;  // the default drafter (docs/server.md)
};

int g_signal_pipe[2] = {-1, -1};
// Written to the signal pipe when --exit-on-inconsistency stops the server: a drain like
// the first SIGTERM's.
constexpr unsigned char kInconsistentWake = 0xFF;

void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!write(g_signal_pipe[1], &b, 1);
}

void install_signal_handlers() {
  // SIGINT/SIGTERM may land on any thread (libraries start their own), so the handler
  // only writes to a pipe that the signal thread reads.
  if (pipe(g_signal_pipe) != 0) {
    throw detinfer::Error(detinfer::ErrorCode::kInternal, "cannot create the signal pipe");
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// One connection costs one descriptor: allow as many as the hard limit lets us.
void raise_descriptor_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

detinfer_http::ServerOptions http_options(const ServeOptions& o, detinfer_cli::ServeApp& app) {
  detinfer_http::ServerOptions h;
  h.host = o.host;
  h.port = o.port;
  h.limits = o.limits;
  h.max_connections = o.max_connections;
  h.max_connections_per_client = o.max_connections_per_client;
  h.request_timeout_s = o.request_timeout_s;
  h.keep_alive_timeout_s = o.keep_alive_timeout_s;
  h.write_timeout_s = o.write_timeout_s;
  h.worker_threads = o.http_threads;
  h.is_quick = detinfer_cli::is_probe_request;
  h.error_response = [](int status, const std::string& message) {
    return detinfer_cli::ServeApp::error_response(status, message);
  };
  h.on_response = [&app](int status) { app.count(status); };
  h.on_abandoned = [&app](const detinfer_http::Request& r) { app.abandoned(r); };
  return h;
}

// Graceful shutdown on the first SIGINT/SIGTERM: stop accepting, let in-flight requests
// finish for --shutdown-timeout, cancel the rest, flush, end the loop. A second signal
// exits at once.
class Shutdown {
 public:
  Shutdown(const ServeOptions& o, detinfer_cli::ServeApp& app, detinfer_http::HttpServer& http)
      : o_(o), app_(app), http_(http) {
    signals_ = std::thread([this] { read_signals(); });
    worker_ = std::thread([this] { drain(); });
  }
  ~Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      exiting_ = true;
    }
    cv_.notify_all();
    const unsigned char wake = 0;
    (void)!write(g_signal_pipe[1], &wake, 1);
    signals_.join();
    worker_.join();
  }

 private:
  void read_signals() {
    int received = 0;
    for (;;) {
      unsigned char sig = 0;
      if (read(g_signal_pipe[0], &sig, 1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (sig == 0 && exiting_) return;
      if (sig == 0) continue;
      if (sig == kInconsistentWake) {
        signalled_ = true;
        cv_.notify_all();
        continue;
      }
      if (++received >= 2) {
        std::cerr << "detinfer serve: second signal, exiting now\n";
        std::_Exit(128 + sig);
      }
      std::cerr << "detinfer serve: signal " << static_cast<int>(sig) << ", shutting down\n";
      signalled_ = true;
      cv_.notify_all();
    }
  }

  void drain() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return signalled_ || exiting_; });
      if (!signalled_) return;
    }
    app_.begin_shutdown();
    http_.stop_accepting();
    if (!wait_idle(o_.shutdown_timeout_s)) {
      std::cerr << "detinfer serve: cancelling in-flight requests\n";
      app_.cancel_inflight();
      wait_idle(2.0);
    }
    http_.stop(1.0);
  }

  // Waits until no request is in flight (true) or `seconds` passed (false).
  bool wait_idle(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
    std::unique_lock<std::mutex> lock(mu_);
    while (http_.in_flight() > 0) {
      if (std::chrono::steady_clock::now() >= deadline || exiting_) return false;
      cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    return true;
  }

  const ServeOptions& o_;
  detinfer_cli::ServeApp& app_;
  detinfer_http::HttpServer& http_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool signalled_ = false;
  bool exiting_ = false;
  std::thread signals_, worker_;
};

void write_port_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::filesystem::rename(tmp, path);
}

int run_serve(ServeOptions o) {
  // Before any thread starts: freed request memory in few arenas, which large chat
  // requests give back (chat_protocol.cpp; issue 33).
  detinfer::core::limit_heap_arenas(4);
  detinfer_cli::ApiKeyOptions key_options = o.config.auth;
  key_options.keys = o.api_keys;
  std::vector<std::string> api_keys = detinfer_cli::resolve_api_keys(key_options);
  install_signal_handlers();
  raise_descriptor_limit();
  if (o.model_name.empty()) {
    o.model_name = std::filesystem::path(o.model).lexically_normal().filename().string();
    if (o.model_name.empty()) {
      o.model_name = std::filesystem::path(o.model).parent_path().filename().string();
    }
  }
  detinfer_cli::ServeRuntime runtime(o.model, o.config, o.inject_mismatches,
                                     [] { (void)!write(g_signal_pipe[1], &kInconsistentWake, 1); });
  if (o.flags->print_config()) {
    o.flags->print(runtime.config(), runtime.session());
    return 0;
  }
  if (!runtime.fingerprint_accepted()) return detinfer_cli::kExitFingerprintMismatch;
  detinfer::DeterministicSession& session = runtime.session();
  detinfer_cli::ServeApp app(o.model_name, session, &runtime.hooks());
  detinfer::GenerationConfig spec;
  o.speculative.apply(spec);
  if (spec.draft_tokens > 0) {
    // Checked once here, so that requests are not refused for the server's own choice.
    if (session.mode() != detinfer::NumericsMode::kCanonical) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "--speculative needs canonical numerics (--mode canonical)",
                            "speculative");
    }
    if (spec.draft_with_model && o.config.session.draft_model_path.empty()) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "--speculative draft needs --draft-model DIR", "speculative");
    }
    app.set_default_speculation(spec);
  }
  detinfer_http::CorsOptions cors;
  cors.allowed_origins = o.cors_origins;
  detinfer_http::Router router(
      [](int status, const std::string& message) {
        return detinfer_cli::ServeApp::error_response(status, message);
      },
      cors);
  app.add_routes(router);
  const detinfer_cli::ServeAuth auth(std::move(api_keys), key_options.protect_health,
                                     key_options.protect_metrics, session.metrics());
  detinfer_http::HttpServer http(
      http_options(o, app),
      [&router, &auth](const detinfer_http::Request& q, detinfer_http::ResponseWriter& w) {
        if (auth.admit(q, w, &router)) router.handle(q, w);
      });
  const int port = http.bind();
  if (!o.port_file.empty()) write_port_file(o.port_file, port);
  std::cerr << "detinfer serve: listening on http://" << o.host << ":" << port << " (model "
            << o.model_name << ", " << detinfer::to_string(session.mode()) << ", "
            << app.fingerprint() << (auth.enabled() ? ", API keys required" : "") << ")\n";
  {
    Shutdown shutdown(o, app, http);
    http.run();  // returns once stopped and every handler has finished
  }
  session.close();
  std::cerr << "detinfer serve: stopped\n";
  return runtime.exit_code(0);
}

void add_limit_options(CLI::App& sub, ServeOptions& o) {
  sub.add_option("--http-threads", o.http_threads, "Requests handled at once (worker threads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  sub.add_option("--max-body-bytes", o.limits.max_body_bytes,
                 "Request body limit, any transfer encoding (413 above)")
      ->capture_default_str();
  sub.add_option("--max-header-bytes", o.limits.max_header_bytes,
                 "Request line + header limit (431 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{256}, std::size_t{1} << 24));
  sub.add_option("--max-request-line", o.limits.max_request_line, "Request line limit (414 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{64}, std::size_t{1} << 24));
  sub.add_option("--max-headers", o.limits.max_headers, "Header fields per request (431 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{10000}));
  sub.add_option("--max-connections", o.max_connections, "Open connections (503 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  sub.add_option("--max-connections-per-client", o.max_connections_per_client,
                 "Open connections from one address (503 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  sub.add_option("--request-timeout", o.request_timeout_s,
                 "Seconds from a request's first byte to its last (408 after)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  sub.add_option("--keep-alive-timeout", o.keep_alive_timeout_s,
                 "Seconds an idle connection is kept between requests")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  sub.add_option("--write-timeout", o.write_timeout_s,
                 "Seconds without progress writing a response before the connection is dropped")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  sub.add_option("--cors-origin", o.cors_origins,
                 "Origin allowed to call from a browser (repeatable; '*' = any; default none)");
}

const detinfer_cli::RegisterCommand kRegister(
    "serve",
    "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
    "/metrics)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<ServeOptions>();
      sub.add_option("--model", o->model, "Model folder or GGUF file")->required();
      sub.add_option("--model-name", o->model_name, "Name clients use (default: folder name)");
      sub.add_option("--host", o->host, "Address to listen on")->capture_default_str();
      sub.add_option("--port", o->port, "Port (0 = any free port)")
          ->capture_default_str()
          ->check(CLI::Range(0, 65535));
      sub.add_option("--port-file", o->port_file, "Write the bound port to this file");
      add_limit_options(sub, *o);
      sub.add_option("--api-key", o->api_keys,
                     "API key clients must send as 'Authorization: Bearer <key>' (repeatable; "
                     "prefer --api-key-file: arguments are visible to other local users)");
      sub.add_option("--shutdown-timeout", o->shutdown_timeout_s,
                     "Seconds to let in-flight requests finish on SIGINT/SIGTERM")
          ->capture_default_str();
      sub.add_option("--inject-consistency-mismatches", o->inject_mismatches,
                     "Testing: count N synthetic mismatched consistency checks")
          ->group("");
      o->speculative.add(sub);
      auto flags = std::make_shared<detinfer_cli::SessionFlags>(sub, true);
      sub.callback([o, flags, &exit_code] {
        o->config = flags->resolve();
        o->flags = flags;
        exit_code = run_serve(*o);
      });
    });

}  // namespace
