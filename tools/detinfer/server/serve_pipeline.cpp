// The one request pipeline of ServeApp (serve_app.h, docs/server.md "One request
// pipeline"): every generating route, whatever its dialect, is parsed once into a
// ServeRequest, admitted (fleet fingerprint 421, seed policy), submitted, answered whole
// or streamed (cancelled when the client goes away, tracked while in flight), recorded
// (seed counters, seed log) and only then rendered in its dialect. Errors at any stage
// name the parameter the request itself sent (request_param()).
#include <cctype>
#include <optional>

#include "chat_protocol.h"
#include "detinfer/error.h"
#include "serve_app.h"
#include "serve_render.h"
#include "serve_stream.h"

namespace detinfer_cli {

using detinfer_http::Request;
using detinfer_http::Response;
using detinfer_http::ResponseWriter;

std::unique_ptr<ResponseRenderer> make_renderer(const RenderInput& in) {
  switch (in.req.dialect()) {
    case Dialect::kChat:
      return chat_renderer(in);
    case Dialect::kCompletion:
      break;
  }
  return completion_renderer(in);
}

namespace {

// Request bodies are JSON. A client that says it sends a form (multipart/form-data, with
// or without a boundary) gets a 415 naming the type instead of a JSON parse of its bytes.
// No Content-Type, or any other one (curl -d sends x-www-form-urlencoded), is read as
// JSON, as OpenAI's server does.
std::optional<ApiError> unsupported_media_type(const Request& http) {
  std::string type = http.header("Content-Type");
  type = type.substr(0, type.find(';'));
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  if (type.rfind("multipart/", 0) != 0) return std::nullopt;
  ApiError e;
  e.status = 415;
  e.message = "Content-Type " + type +
              " is not supported: send the request body as "
              "application/json";
  e.code = "unsupported_media_type";
  return e;
}

}  // namespace

void ServeApp::apply_default_speculation(ServeRequest& req) const {
  if (default_spec_.draft_tokens == 0 || req.config.num_beams > 1) return;
  for (const char* f : {"draft_tokens", "draft_with_model"}) {
    if (req.sources.of(f) == FieldSource::kClient) return;  // the client's choice, "off" too
  }
  req.config.draft_tokens = default_spec_.draft_tokens;
  req.config.draft_with_model = default_spec_.draft_with_model;
}

ParseOutcome ServeApp::parse(Dialect dialect, const std::string& body) const {
  switch (dialect) {
    case Dialect::kChat:
      return parse_chat_request(body, model_name_, session_);
    case Dialect::kCompletion:
      break;
  }
  return parse_completion_request(body, model_name_, session_);
}

void ServeApp::handle(const Request& http, ResponseWriter& w, Dialect dialect) {
  if (refuse_when_stopping(w)) return;
  if (auto e = unsupported_media_type(http)) return w.respond(error_response(*e));
  ParseOutcome parsed = parse(dialect, http.body);
  if (!parsed.request) return w.respond(error_response(parsed.error));
  ServeRequest req = std::move(*parsed.request);
  apply_default_speculation(req);
  SeedSource seed = SeedSource::kDefault;
  if (hooks_ != nullptr) {
    if (auto e = hooks_->admit(http.header("X-Detinfer-Expect-Fingerprint"), req, &seed)) {
      return w.respond(error_response(*e));
    }
  }
  const ResponseContext ctx = context(dialect);
  // The renderer reads `req`, which outlives it.
  const std::unique_ptr<ResponseRenderer> render =
      make_renderer({req, ctx, session_, wants_full_fingerprint(http)});
  if (req.stream) {
    respond_stream(req, ctx, seed, *render, w);
  } else {
    respond_whole(req, ctx, seed, *render, w);
  }
}

void ServeApp::finished(const ResponseContext& ctx, const detinfer::GenerationResult& result,
                        SeedSource seed) {
  if (hooks_ != nullptr) hooks_->finished(ctx.id, result.seed, seed);
}

void ServeApp::respond_whole(const ServeRequest& req, const ResponseContext& ctx, SeedSource seed,
                             ResponseRenderer& render, ResponseWriter& w) {
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(req.prompt, req.config);
  } catch (const detinfer::Error& e) {
    submit_error(e, req.names, w);
    return;
  }
  track(handle.get(), true);
  // A client that goes away cancels its request at the next step.
  w.on_client_gone([handle] { handle->cancel(); });
  try {
    const detinfer::GenerationResult result = handle->get();
    track(handle.get(), false);
    finished(ctx, result, seed);
    Response r;
    r.body = dump_json(render.whole(result));
    w.respond(std::move(r));
  } catch (const detinfer::Error& e) {
    track(handle.get(), false);
    submit_error(e, req.names, w);
  }
}

void ServeApp::respond_stream(const ServeRequest& req, const ResponseContext& ctx, SeedSource seed,
                              ResponseRenderer& render, ResponseWriter& w) {
  std::optional<EventStream> es;
  try {
    es.emplace(session_, req.prompt, req.config);
  } catch (const detinfer::Error& e) {
    submit_error(e, req.names, w);
    return;
  }
  track(es->handle(), true);
  es->start(w);
  const std::int32_t n = std::max(req.config.num_return_sequences, req.config.num_beams);
  for (const nlohmann::json& j : render.opening(n)) es->send(j);
  es->drain([&](StreamEvent& ev) {
    if (ev.index < 0 || ev.index >= n) return;
    if (auto chunk = render.event(ev)) es->send(*chunk);
  });
  track(es->handle(), false);
  try {
    const detinfer::GenerationResult result = es->result();
    finished(ctx, result, seed);
    for (const nlohmann::json& j : render.closing(result)) es->send(j);
  } catch (const detinfer::Error& e) {
    es->send(error_body(from_error(e, req.names)));
  }
  es->finish();
}

}  // namespace detinfer_cli
