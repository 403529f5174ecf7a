// `detinfer serve`: an OpenAI-compatible HTTP server over one DeterministicSession.
// Every request goes through the same session, so concurrent requests are batched
// together — and stay bitwise reproducible in canonical mode.
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/metrics.h"
#include "detinfer/session.h"
#include "openai_protocol.h"
#include "serve_policy.h"
#include "serve_runtime.h"
#include "session_flags.h"

namespace {

using detinfer_cli::ApiError;
using nlohmann::json;

struct ServeOptions {
  std::string model;
  std::string model_name;  // default: the folder's name
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string port_file;                // written with the bound port (useful with --port 0)
  detinfer_cli::ToolConfig config;      // session options and policies (session_flags.h)
  std::uint64_t inject_mismatches = 0;  // testing: synthetic failed consistency checks
  std::shared_ptr<detinfer_cli::SessionFlags> flags;
  bool print_config = false;
  std::int32_t http_threads = 64;
  std::size_t max_body_bytes = 1 << 20;
  double shutdown_timeout_s = 10.0;
};

// Events of one streamed request, handed from the engine thread to the HTTP thread so
// that a slow client never stalls the engine.
struct StreamQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::int32_t, std::string>> pieces;  // (choice index, text)
  bool done = false;
};

class Server {
 public:
  Server(const ServeOptions& o, detinfer::DeterministicSession& session,
         detinfer_cli::ServeHooks& hooks)
      : o_(o),
        session_(session),
        hooks_(hooks),
        // The HTTP counters live in the session's registry, so /metrics is one render with
        // no duplicated family; the session itself counts requests, tokens and latencies.
        http_requests_ok_(http_counter("2xx")),
        http_requests_4xx_(http_counter("4xx")),
        http_requests_5xx_(http_counter("5xx")) {
    fingerprint_ = detinfer_cli::system_fingerprint(session_);
  }

  int run();
  void request_stop();

 private:
  void handle_completions(const httplib::Request& req, httplib::Response& res);
  void send_error(httplib::Response& res, const ApiError& e);
  detinfer::Counter http_counter(const char* status_class) {
    return session_.metrics().counter("detinfer_http_requests_total",
                                      "HTTP requests answered by the server, by status class",
                                      {{"class", status_class}});
  }
  void count(int status) {
    if (status < 400) {
      http_requests_ok_.inc();
    } else if (status < 500) {
      http_requests_4xx_.inc();
    } else {
      http_requests_5xx_.inc();
    }
  }
  detinfer_cli::ResponseContext context() {
    detinfer_cli::ResponseContext ctx;
    const std::uint64_t n = next_id_.fetch_add(1);
    ctx.id = "cmpl-" + detinfer::hex64(detinfer::xxh3_64(&n, sizeof n, start_ns_));
    ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    ctx.model = o_.model_name;
    ctx.system_fingerprint = fingerprint_;
    return ctx;
  }
  void track(const detinfer::RequestHandle* h, bool add) {
    std::lock_guard<std::mutex> lock(inflight_mu_);
    if (add) {
      inflight_.insert(h);
    } else {
      inflight_.erase(h);
    }
  }

  const ServeOptions& o_;
  detinfer::DeterministicSession& session_;
  detinfer_cli::ServeHooks& hooks_;  // fleet check, seed policy, /health, /metrics
  httplib::Server http_;
  detinfer::Counter http_requests_ok_, http_requests_4xx_, http_requests_5xx_;
  std::string fingerprint_;
  std::atomic<std::uint64_t> next_id_{0};
  std::uint64_t start_ns_ =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::atomic<bool> stopping_{false};
  std::mutex inflight_mu_;
  std::set<const detinfer::RequestHandle*> inflight_;

 public:
  void cancel_inflight() {
    std::lock_guard<std::mutex> lock(inflight_mu_);
    for (const auto* h : inflight_) h->cancel();
  }
};

void Server::send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(detinfer_cli::error_body(e).dump(), "application/json");
}

// The request parameter an engine error names: "GenerationConfig.max_new_tokens must be
// ..." is the client's max_tokens; "the prompt has 3000 tokens ..." is the prompt.
// The OpenAI parameter of a GenerationConfig field named by Error::field() (the same name
// unless the OpenAI API spells it differently).
std::string openai_param(const std::string& field) {
  if (field == "max_new_tokens") return "max_tokens";
  if (field == "num_return_sequences") return "n";
  if (field == "stop_strings") return "stop";
  return field;
}

ApiError from_error(const detinfer::Error& e) {
  ApiError a;
  a.message = e.message();
  switch (e.code()) {
    case detinfer::ErrorCode::kInvalidArgument:
    case detinfer::ErrorCode::kNotFound:
    case detinfer::ErrorCode::kUnsupported:
      a.status = 400;
      break;
    case detinfer::ErrorCode::kResourceExhausted:
      // With a field the request can never fit (KV pool, context): retrying cannot help.
      if (!e.field().empty()) {
        a.status = 400;
        a.code = "request_too_large";
        a.param = "max_tokens";
        break;
      }
      a.status = 429;
      a.type = "rate_limit_error";
      a.code = "queue_full";
      break;
    case detinfer::ErrorCode::kUnavailable:
      a.status = 503;
      a.type = "server_error";
      a.code = "unavailable";
      break;
    default:
      a.status = 500;
      a.type = "server_error";
  }
  if (a.status == 400) a.param = openai_param(e.field());
  return a;
}

void Server::handle_completions(const httplib::Request& req, httplib::Response& res) {
  if (stopping_) {
    ApiError e{503, "the server is shutting down", "", "server_error", "unavailable"};
    res.set_header("Retry-After", "1");
    send_error(res, e);
    return;
  }
  detinfer_cli::ParseOutcome parsed =
      detinfer_cli::parse_completion_request(req.body, o_.model_name, session_);
  if (!parsed.request) {
    send_error(res, parsed.error);
    return;
  }
  detinfer_cli::SeedSource seed_source = detinfer_cli::SeedSource::kDefault;
  if (auto e = hooks_.admit(req.get_header_value("X-Detinfer-Expect-Fingerprint"), req.body,
                            parsed.request->config, &seed_source)) {
    send_error(res, *e);
    return;
  }
  const bool full_fp = req.get_param_value("fingerprint") == "full" ||
                       req.get_header_value("X-Detinfer-Fingerprint") == "full";
  auto creq = std::make_shared<detinfer_cli::CompletionRequest>(std::move(*parsed.request));
  const detinfer_cli::ResponseContext ctx = context();

  if (!creq->stream) {
    try {
      detinfer::RequestHandle handle = session_.submit(creq->prompt, creq->config);
      track(&handle, true);
      detinfer::GenerationResult result;
      try {
        result = handle.get();
      } catch (...) {
        track(&handle, false);
        throw;
      }
      track(&handle, false);
      hooks_.finished(ctx.id, result.seed, seed_source);
      res.set_content(detinfer_cli::completion_response(ctx, *creq, result, session_, full_fp)
                          .dump(-1, ' ', false, json::error_handler_t::replace),
                      "application/json");
    } catch (const detinfer::Error& e) {
      const ApiError a = from_error(e);
      if (a.status == 429 || a.status == 503) res.set_header("Retry-After", "1");
      send_error(res, a);
    }
    return;
  }

  // Streaming: submit now so that validation errors are still plain HTTP errors.
  auto queue = std::make_shared<StreamQueue>();
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(creq->prompt, creq->config, [queue](const detinfer::TokenEvent& ev) {
      std::lock_guard<std::mutex> lock(queue->mu);
      queue->pieces.emplace_back(ev.sample_index, ev.text);
      queue->cv.notify_one();
      return true;
    });
  } catch (const detinfer::Error& e) {
    const ApiError a = from_error(e);
    if (a.status == 429 || a.status == 503) res.set_header("Retry-After", "1");
    send_error(res, a);
    return;
  }
  track(handle.get(), true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, queue, handle, creq, ctx, seed_source](std::size_t, httplib::DataSink& sink) {
        auto write_event = [&](const json& j) {
          const std::string data =
              "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
          return sink.write(data.data(), data.size());
        };
        bool client_ok = true;
        if (creq->echo) {
          for (std::int32_t i = 0; i < creq->config.num_return_sequences && client_ok; ++i) {
            client_ok = write_event(detinfer_cli::stream_chunk(ctx, i, creq->prompt_text, nullptr));
          }
        }
        auto& fut = handle->future();
        for (;;) {
          std::deque<std::pair<std::int32_t, std::string>> batch;
          bool finished = false;
          {
            std::unique_lock<std::mutex> lock(queue->mu);
            queue->cv.wait_for(lock, std::chrono::milliseconds(20),
                               [&] { return !queue->pieces.empty(); });
            batch.swap(queue->pieces);
          }
          for (auto& [index, text] : batch) {
            if (!client_ok || text.empty()) continue;
            client_ok = write_event(detinfer_cli::stream_chunk(ctx, index, text, nullptr));
          }
          if (!client_ok) handle->cancel();
          finished = fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
          if (finished) {
            std::lock_guard<std::mutex> lock(queue->mu);
            if (!queue->pieces.empty()) continue;  // drain what arrived meanwhile
            break;
          }
        }
        track(handle.get(), false);
        try {
          detinfer::GenerationResult result = fut.get();
          hooks_.finished(ctx.id, result.seed, seed_source);
          for (std::size_t i = 0; i < result.sequences.size() && client_ok; ++i) {
            json last =
                detinfer_cli::stream_chunk(ctx, static_cast<std::int32_t>(i), "",
                                           detinfer::to_string(result.sequences[i].finish_reason));
            last["detinfer"] = {{"seed", result.seed},
                                {"digest", detinfer::hex64(result.sequences[i].digest)}};
            client_ok = write_event(last);
          }
        } catch (const detinfer::Error& e) {
          if (client_ok) client_ok = write_event(detinfer_cli::error_body(from_error(e)));
        }
        if (client_ok) {
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
        }
        sink.done();
        return true;
      });
}

int Server::run() {
  const std::size_t http_threads = static_cast<std::size_t>(o_.http_threads);
  http_.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  http_.set_payload_max_length(o_.max_body_bytes);
  http_.set_read_timeout(30, 0);
  http_.set_write_timeout(30, 0);
  http_.set_keep_alive_timeout(5);
  http_.set_logger(
      [this](const httplib::Request&, const httplib::Response& res) { count(res.status); });
  http_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    e.message = res.status == 413   ? "request body too large"
                : res.status == 404 ? "no such endpoint"
                                    : "request failed with HTTP " + std::to_string(res.status);
    res.set_content(detinfer_cli::error_body(e).dump(), "application/json");
  });
  http_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        ApiError e;
        e.status = 500;
        e.type = "server_error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
          e.message = ex.what();
        } catch (...) {
          e.message = "unknown error";
        }
        res.status = 500;
        res.set_content(detinfer_cli::error_body(e).dump(), "application/json");
      });

  http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completions(req, res);
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", o_.model_name},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "detinfer"},
              {"detinfer",
               {{"model_fingerprint", session_.model_fingerprint()},
                {"architecture", session_.architecture()},
                {"context_length", session_.context_length()},
                {"system_fingerprint", fingerprint_}}}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(),
                    "application/json");
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const auto [status, body] = hooks_.health(stopping_);
    res.status = status;
    res.set_content(body.dump(), "application/json");
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(hooks_.metrics_text(), detinfer::MetricsRegistry::content_type());
  });

  // cpp-httplib listens with a backlog of 5: a burst of clients overflows it and some
  // connections fail. Keep the listening socket (SO_REUSEADDR as httplib's default) and
  // listen() on it again with the system's limit once bound.
  int listen_fd = -1;
  http_.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  const int port = o_.port == 0 ? http_.bind_to_any_port(o_.host) : o_.port;
  if (o_.port != 0 && !http_.bind_to_port(o_.host, o_.port)) {
    throw detinfer::Error(detinfer::ErrorCode::kUnavailable,
                          "cannot listen on " + o_.host + ":" + std::to_string(o_.port));
  }
  if (port < 0) {
    throw detinfer::Error(detinfer::ErrorCode::kUnavailable, "cannot listen on " + o_.host);
  }
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  if (!o_.port_file.empty()) {
    const std::string tmp = o_.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::filesystem::rename(tmp, o_.port_file);
  }
  std::cerr << "detinfer serve: listening on http://" << o_.host << ":" << port << " (model "
            << o_.model_name << ", " << detinfer::to_string(session_.mode()) << ", " << fingerprint_
            << ")\n";
  http_.listen_after_bind();
  return 0;
}

void Server::request_stop() {
  stopping_ = true;
  http_.stop();
}

int g_signal_pipe[2] = {-1, -1};
// Written to the signal pipe when --exit-on-inconsistency stops the server.
constexpr unsigned char kInconsistentWake = 0xFF;

void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!write(g_signal_pipe[1], &b, 1);
}

int run_serve(ServeOptions o) {
  // SIGINT/SIGTERM may land on any thread (libraries start their own), so the handler
  // only writes to a pipe that the shutdown thread reads.
  if (pipe(g_signal_pipe) != 0) {
    throw detinfer::Error(detinfer::ErrorCode::kInternal, "cannot create the signal pipe");
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (o.model_name.empty()) {
    o.model_name = std::filesystem::path(o.model).lexically_normal().filename().string();
    if (o.model_name.empty()) {
      o.model_name = std::filesystem::path(o.model).parent_path().filename().string();
    }
  }
  detinfer_cli::ServeRuntime runtime(o.model, o.config, o.inject_mismatches, [] {
    (void)!write(g_signal_pipe[1], &kInconsistentWake, 1);  // drain like SIGTERM
  });
  if (o.print_config) {
    o.flags->print(runtime.config(), runtime.session());
    return 0;
  }
  if (!runtime.fingerprint_accepted()) return detinfer_cli::kExitFingerprintMismatch;
  detinfer::DeterministicSession& session = runtime.session();
  Server server(o, session, runtime.hooks());

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool listening_done = false;
  bool exiting = false;
  // Waits for SIGINT/SIGTERM (or for the end of run()), stops accepting, lets in-flight
  // requests finish for up to --shutdown-timeout seconds, then cancels them.
  std::thread signal_thread([&] {
    unsigned char sig = 0;
    while (read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    {
      std::lock_guard<std::mutex> lock(stop_mu);
      if (exiting) return;
    }
    if (sig != kInconsistentWake) {
      std::cerr << "detinfer serve: signal " << static_cast<int>(sig) << ", shutting down\n";
    }
    server.request_stop();
    std::unique_lock<std::mutex> lock(stop_mu);
    const auto timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(o.shutdown_timeout_s * 1000));
    if (!stop_cv.wait_for(lock, timeout, [&] { return listening_done; })) {
      std::cerr << "detinfer serve: cancelling in-flight requests\n";
      server.cancel_inflight();
    }
  });
  auto finish_signal_thread = [&] {
    {
      std::lock_guard<std::mutex> lock(stop_mu);
      listening_done = true;
      exiting = true;
    }
    stop_cv.notify_all();
    const unsigned char wake = 0;
    (void)!write(g_signal_pipe[1], &wake, 1);
    signal_thread.join();
  };
  int rc = 0;
  try {
    // Returns once stopped and every in-flight handler has finished.
    rc = server.run();
  } catch (...) {
    finish_signal_thread();
    throw;
  }
  finish_signal_thread();
  session.close();
  std::cerr << "detinfer serve: stopped\n";
  return runtime.exit_code(rc);
}

const detinfer_cli::RegisterCommand kRegister(
    "serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/models, /health, /metrics)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<ServeOptions>();
      sub.add_option("--model", o->model, "Model folder")->required();
      sub.add_option("--model-name", o->model_name, "Name clients use (default: folder name)");
      sub.add_option("--host", o->host, "Address to listen on")->capture_default_str();
      sub.add_option("--port", o->port, "Port (0 = any free port)")
          ->capture_default_str()
          ->check(CLI::Range(0, 65535));
      sub.add_option("--port-file", o->port_file, "Write the bound port to this file");
      sub.add_option("--http-threads", o->http_threads, "Concurrent HTTP connections")
          ->capture_default_str()
          ->check(CLI::Range(1, 4096));
      sub.add_option("--max-body-bytes", o->max_body_bytes, "Request body limit (413 above)")
          ->capture_default_str();
      sub.add_option("--shutdown-timeout", o->shutdown_timeout_s,
                     "Seconds to let in-flight requests finish on SIGINT/SIGTERM")
          ->capture_default_str();
      sub.add_option("--inject-consistency-mismatches", o->inject_mismatches,
                     "Testing: count N synthetic mismatched consistency checks")
          ->group("");
      auto flags = std::make_shared<detinfer_cli::SessionFlags>(sub, true);
      sub.callback([o, flags, &exit_code] {
        o->config = flags->resolve();
        o->flags = flags;
        o->print_config = flags->print_config();
        exit_code = run_serve(*o);
      });
    });

}  // namespace
