#include "serve_app.h"

#include <chrono>

#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "openai_fields.h"
#include "serve_stream.h"
#include "verify_routes.h"

namespace detinfer_cli {

using detinfer_http::Request;
using detinfer_http::Response;
using detinfer_http::ResponseWriter;
using nlohmann::json;

ApiError from_error(const detinfer::Error& e, const ParamNames& names) {
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
  // The request parameter an engine error names: its field() under the request's own
  // name (the message text is never parsed).
  if (a.status == 400) a.param = request_param(e.field(), names);
  return a;
}

ServeApp::ServeApp(std::string model_name, detinfer::DeterministicSession& session,
                   ServeHooks* hooks)
    : model_name_(std::move(model_name)),
      session_(session),
      hooks_(hooks),
      // The HTTP counters live in the session's registry, so /metrics is one render
      // with no duplicated family.
      http_ok_(http_counter("2xx")),
      http_4xx_(http_counter("4xx")),
      http_5xx_(http_counter("5xx")),
      cancelled_(detinfer::SessionMetrics(session.metrics()).requests_cancelled),
      fingerprint_(system_fingerprint(session)),
      start_ns_(
          static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {
}

detinfer::Counter ServeApp::http_counter(const char* status_class) {
  return session_.metrics().counter("detinfer_http_requests_total",
                                    "HTTP requests answered by the server, by status class",
                                    {{"class", status_class}});
}

void ServeApp::abandoned(const Request& req) {
  if (req.method == "POST" &&
      (req.path == "/v1/completions" || req.path == "/v1/chat/completions")) {
    cancelled_.inc();
  }
}

void ServeApp::count(int status) {
  if (status < 400) {
    http_ok_.inc();
  } else if (status < 500) {
    http_4xx_.inc();
  } else {
    http_5xx_.inc();
  }
}

Response ServeApp::error_response(const ApiError& e) {
  Response r;
  r.status = e.status;
  r.body = dump_json(error_body(e));
  if (e.status == 429 || e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

Response ServeApp::error_response(int status, const std::string& message) {
  ApiError e;
  e.status = status;
  e.message = message;
  if (status >= 500) e.type = "server_error";
  if (status == 503) e.code = "unavailable";
  return error_response(e);
}

ResponseContext ServeApp::context(Dialect dialect) {
  ResponseContext ctx;
  const std::uint64_t n = next_id_.fetch_add(1);
  ctx.id = std::string(dialect == Dialect::kChat ? "chatcmpl-" : "cmpl-") +
           detinfer::hex64(detinfer::xxh3_64(&n, sizeof n, start_ns_));
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ctx.model = model_name_;
  ctx.system_fingerprint = fingerprint_;
  return ctx;
}

void ServeApp::track(const detinfer::RequestHandle* h, bool add) {
  std::lock_guard<std::mutex> lock(inflight_mu_);
  if (add) {
    inflight_.insert(h);
  } else {
    inflight_.erase(h);
  }
}

void ServeApp::cancel_inflight() {
  std::lock_guard<std::mutex> lock(inflight_mu_);
  for (const auto* h : inflight_) h->cancel();
}

void ServeApp::add_routes(detinfer_http::Router& router) {
  router.add("POST", "/v1/completions",
             [this](const Request& q, ResponseWriter& w) { handle(q, w, Dialect::kCompletion); });
  router.add("POST", "/v1/chat/completions",
             [this](const Request& q, ResponseWriter& w) { handle(q, w, Dialect::kChat); });
  router.add("GET", "/v1/models", [this](const Request& q, ResponseWriter& w) { models(q, w); });
  router.add("GET", "/v1/models/{}", [this](const Request& q, ResponseWriter& w) { models(q, w); });
  router.add("GET", "/health", [this](const Request& q, ResponseWriter& w) { health(q, w); });
  router.add("GET", "/metrics", [this](const Request& q, ResponseWriter& w) { metrics(q, w); });
  add_verify_routes(router, session_);
}

void ServeApp::submit_error(const detinfer::Error& e, const ParamNames& names, ResponseWriter& w) {
  w.respond(error_response(from_error(e, names)));
}

}  // namespace detinfer_cli
