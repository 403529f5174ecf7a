// The routes of `detinfer serve` over the transport-independent HTTP interface
// (http/http_message.h): /v1/completions, /v1/chat/completions, /v1/models[/{id}],
// /health, /metrics. Handlers run on the HTTP server's worker threads and may block on
// the session. Every generating route goes through one pipeline (serve_pipeline.cpp):
// its dialect's parser -> admit -> submit -> whole or streamed -> finished, rendered in
// the dialect at the end (serve_render.h).
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
#include "serve_request.h"

namespace detinfer_cli {

// The HTTP error for an Error of the session: 400 naming the parameter (request_param():
// under the request's own names) for invalid input and for requests that can never fit
// (KV pool, context), 429 for a full queue, 503 once closed, 500 otherwise.
ApiError from_error(const detinfer::Error& e, const ParamNames& names = {});

class ResponseRenderer;  // serve_render.h

class ServeApp {
 public:
  // `hooks` (optional, must outlive the app): the fleet check and seed policy before each
  // request of any dialect, the seed log after it, /health and /metrics (serve_policy.h).
  ServeApp(std::string model_name, detinfer::DeterministicSession& session,
           ServeHooks* hooks = nullptr);

  void add_routes(detinfer_http::Router& router);
  // An OpenAI-shaped error response (also for transport errors: 400, 408, 413, 431...).
  static detinfer_http::Response error_response(const ApiError& e);
  static detinfer_http::Response error_response(int status, const std::string& message);
  // Counts one answered response by status class (detinfer_http_requests_total).
  void count(int status);
  // A request whose client left while it waited for an HTTP worker (never parsed, never
  // submitted): a generating route's counts once in detinfer_requests_total{finish_reason=
  // "cancelled"}, as a request cancelled in the engine's queue does (issue 33, item 4).
  void abandoned(const detinfer_http::Request& req);

  // From now on generating routes get 503 and /health answers 503.
  void begin_shutdown() { stopping_ = true; }
  // Cancels every request still generating (they end with finish_reason "cancelled").
  void cancel_inflight();
  const std::string& fingerprint() const { return fingerprint_; }
  // `serve --speculative`: the drafter (draft_tokens, draft_with_model of `c`) of every
  // request that sets no speculative parameter of its own and is not a beam search
  // (docs/server.md). Call before the routes serve requests.
  void set_default_speculation(const detinfer::GenerationConfig& c) { default_spec_ = c; }

 private:
  // The pipeline of every generating route (serve_pipeline.cpp).
  void handle(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w, Dialect dialect);
  // The server's default drafter on a request that chose none (set_default_speculation).
  void apply_default_speculation(ServeRequest& req) const;
  // The dialect's parser over the body (read once).
  ParseOutcome parse(Dialect dialect, const std::string& body) const;
  // A whole answer: submits, cancels when the client goes away, renders or maps the error.
  void respond_whole(const ServeRequest& req, const ResponseContext& ctx, SeedSource seed,
                     ResponseRenderer& render, detinfer_http::ResponseWriter& w);
  // A streamed answer: submits first (validation errors stay plain HTTP errors), then
  // server-sent events until [DONE].
  void respond_stream(const ServeRequest& req, const ResponseContext& ctx, SeedSource seed,
                      ResponseRenderer& render, detinfer_http::ResponseWriter& w);
  // After a request's result: the seed counters and the seed log.
  void finished(const ResponseContext& ctx, const detinfer::GenerationResult& result,
                SeedSource seed);
  void models(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void health(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void metrics(const detinfer_http::Request& req, detinfer_http::ResponseWriter& w);
  void submit_error(const detinfer::Error& e, const ParamNames& names,
                    detinfer_http::ResponseWriter& w);
  // While shutting down: answers 503 and returns true.
  bool refuse_when_stopping(detinfer_http::ResponseWriter& w);
  // ?fingerprint=full or X-Detinfer-Fingerprint: full (the whole run fingerprint).
  static bool wants_full_fingerprint(const detinfer_http::Request& req);
  nlohmann::json model_json() const;
  detinfer::Counter http_counter(const char* status_class);
  ResponseContext context(Dialect dialect);
  void track(const detinfer::RequestHandle* h, bool add);

  std::string model_name_;
  detinfer::DeterministicSession& session_;
  ServeHooks* hooks_;
  detinfer::Counter http_ok_, http_4xx_, http_5xx_;
  detinfer::Counter cancelled_;  // the session's detinfer_requests_total{finish_reason="cancelled"}
  std::string fingerprint_;
  detinfer::GenerationConfig default_spec_;  // draft_tokens 0: no default drafter
  std::atomic<std::uint64_t> next_id_{0};
  std::uint64_t start_ns_;
  std::atomic<bool> stopping_{false};
  std::mutex inflight_mu_;
  std::set<const detinfer::RequestHandle*> inflight_;
};

}  // namespace detinfer_cli
