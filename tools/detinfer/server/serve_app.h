// The routes of `detinfer serve` over the transport-independent HTTP interface
// (http/http_message.h): /v1/completions, /v1/models[/{id}], /health, /metrics. Handlers
// run on the HTTP server's worker threads and may block on the session.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "detinfer/error.h"
#include "detinfer/metrics.h"
#include "detinfer/session.h"
#include "http/router.h"
#include "openai_protocol.h"
#include "serve_policy.h"

namespace detinfer_cli {

// The HTTP error for an Error of the session: 400 naming the parameter for invalid input
// and for requests that can never fit (KV pool, context), 429 for a full queue, 503 once
// closed, 500 otherwise.
ApiError from_error(const detinfer::Error& e);

struct ChatRequest;  // chat_protocol.h

class ServeApp {
 public:
  // `hooks` (optional, must outlive the app): the fleet check and seed policy before each
  // completion, the seed log after it, /health and /metrics (serve_policy.h).
  ServeApp(std::string model_name, detinfer::DeterministicSession& session,
           ServeHooks* hooks = nullptr);

  void add_routes(detinfer_http::Router& router);
  // An OpenAI-shaped error response (also for transport errors: 400, 408, 413, 431...).
  static detinfer_http::Response error_response(const ApiError& e);
  static detinfer_http::Response error_response(int status, const std::string& message);
  // Counts one answered response by status class (detinfer_http_requests_total).
  void count(int status);

  // From now on completions get 503 and /health answers 503.
  void begin_shutdown() { stopping_ = true; }
  // Cancels every request still generating (they end with finish_reason "cancelled").
  void cancel_inflight();
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  void completions(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void stream(std::shared_ptr<CompletionRequest> creq, const ResponseContext& ctx, SeedSource seed,
              detinfer_http::ResponseWriter& w);
  // /v1/chat/completions (chat_routes.cpp, docs/chat.md "Server").
  void chat_completions(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void chat_stream(std::shared_ptr<ChatRequest> creq, const ResponseContext& ctx,
                   detinfer_http::ResponseWriter& w);
  void models(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void health(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void metrics(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void submit_error(const detinfer::Error& e, detinfer_http::ResponseWriter& w);
  // While shutting down: answers 503 and returns true.
  bool refuse_when_stopping(detinfer_http::ResponseWriter& w);
  // ?fingerprint=full or X-Detinfer-Fingerprint: full (the whole run fingerprint).
  static bool wants_full_fingerprint(const detinfer_http::Request& req);
  // A whole (not streamed) request: submits it, cancels it when the client goes away and
  // answers with render(result), or with the error.
  void respond_whole(
      const detinfer::Prompt& prompt, const detinfer::GenerationConfig& config,
      detinfer_http::ResponseWriter& w,
      const std::function<nlohmann::json(const detinfer::GenerationResult&)>& render);
  nlohmann::json model_json() const;
  detinfer::Counter http_counter(const char* status_class);
  ResponseContext context();
  void track(const detinfer::RequestHandle* h, bool add);

  std::string model_name_;
  detinfer::DeterministicSession& session_;
  ServeHooks* hooks_;
  detinfer::Counter http_ok_, http_4xx_, http_5xx_;
  std::string fingerprint_;
  std::atomic<std::uint64_t> next_id_{0};
  std::uint64_t start_ns_;
  std::atomic<bool> stopping_{false};
  std::mutex inflight_mu_;
  std::set<const detinfer::RequestHandle*> inflight_;
};

}  // namespace detinfer_cli
