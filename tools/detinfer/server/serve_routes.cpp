// The handlers of ServeApp (serve_app.h): completions (whole and streamed), models,
// health and metrics.
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "serve_app.h"
#include "serve_stream.h"

namespace detinfer_cli {

using detinfer_http::Request;
using detinfer_http::Response;
using detinfer_http::ResponseWriter;
using nlohmann::json;

namespace {

Response json_response(int status, const json& body) {
  Response r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

}  // namespace

bool ServeApp::refuse_when_stopping(ResponseWriter& w) {
  const bool stopping = stopping_;
  if (stopping) w.respond(error_response(503, "the server is shutting down"));
  return stopping;
}

bool ServeApp::wants_full_fingerprint(const Request& req) {
  return req.query_param("fingerprint") == "full" || req.header("X-Detinfer-Fingerprint") == "full";
}

void ServeApp::completions(const Request& req, ResponseWriter& w) {
  if (refuse_when_stopping(w)) return;
  ParseOutcome parsed = parse_completion_request(req.body, model_name_, session_);
  if (!parsed.request) return w.respond(error_response(parsed.error));
  SeedSource seed = SeedSource::kDefault;
  if (hooks_ != nullptr) {
    if (auto e = hooks_->admit(req.header("X-Detinfer-Expect-Fingerprint"), req.body,
                               parsed.request->config, &seed)) {
      w.respond(error_response(*e));
      return;
    }
  }
  const bool full_fp = wants_full_fingerprint(req);
  auto creq = std::make_shared<CompletionRequest>(std::move(*parsed.request));
  const ResponseContext ctx = context();
  if (creq->stream) {
    stream(creq, ctx, seed, w);
    return;
  }
  respond_whole(creq->prompt, creq->config, w, [&](const detinfer::GenerationResult& result) {
    if (hooks_ != nullptr) hooks_->finished(ctx.id, result.seed, seed);
    return completion_response(ctx, *creq, result, session_, full_fp);
  });
}

void ServeApp::respond_whole(const detinfer::Prompt& prompt,
                             const detinfer::GenerationConfig& config, ResponseWriter& w,
                             const std::function<json(const detinfer::GenerationResult&)>& render) {
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(prompt, config);
  } catch (const detinfer::Error& e) {
    submit_error(e, w);
    return;
  }
  track(handle.get(), true);
  // A client that goes away cancels its request at the next step.
  w.on_client_gone([handle] { handle->cancel(); });
  try {
    const detinfer::GenerationResult result = handle->get();
    track(handle.get(), false);
    Response r;
    r.body = dump_json(render(result));
    w.respond(std::move(r));
  } catch (const detinfer::Error& e) {
    track(handle.get(), false);
    submit_error(e, w);
  }
}

void ServeApp::stream(std::shared_ptr<CompletionRequest> creq, const ResponseContext& ctx,
                      SeedSource seed, ResponseWriter& w) {
  // Submit first so that validation errors are still plain HTTP errors.
  std::optional<EventStream> es;
  try {
    es.emplace(session_, creq->prompt, creq->config);
  } catch (const detinfer::Error& e) {
    submit_error(e, w);
    return;
  }
  track(es->handle(), true);
  es->start(w);
  const std::int32_t n = std::max(creq->config.num_return_sequences, creq->config.num_beams);
  std::vector<StreamChoiceState> choices(static_cast<std::size_t>(n));
  for (auto& c : choices) c.offset = creq->echo ? code_points(creq->prompt_text) : 0;
  if (creq->echo) {
    for (std::int32_t i = 0; i < n; ++i) es->send(stream_chunk(ctx, i, creq->prompt_text, nullptr));
  }
  es->drain([&](StreamEvent& ev) {
    if (ev.index < 0 || ev.index >= n) return;
    StreamChoiceState& st = choices[static_cast<std::size_t>(ev.index)];
    if (ev.logprobs) st.pending.push_back(std::move(*ev.logprobs));
    if (ev.text.empty()) return;  // logprobs wait for the chunk that carries text
    es->send(stream_text_chunk(ctx, ev.index, ev.text, *creq, st, session_));
  });
  track(es->handle(), false);
  try {
    const detinfer::GenerationResult result = es->result();
    if (hooks_ != nullptr) hooks_->finished(ctx.id, result.seed, seed);
    for (std::size_t i = 0; i < result.sequences.size() && i < choices.size(); ++i) {
      es->send(stream_final_chunk(ctx, static_cast<std::int32_t>(i), result, *creq, choices[i],
                                  session_));
    }
    if (creq->include_usage) es->send(stream_usage_chunk(ctx, result));
  } catch (const detinfer::Error& e) {
    es->send(error_body(from_error(e)));
  }
  es->finish();
}

json ServeApp::model_json() const {
  return {{"id", model_name_},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "detinfer"},
          {"detinfer",
           {{"model_fingerprint", session_.model_fingerprint()},
            {"architecture", session_.architecture()},
            {"context_length", session_.context_length()},
            {"system_fingerprint", fingerprint_}}}};
}

void ServeApp::models(const Request& req, ResponseWriter& w) {
  const std::string prefix = "/v1/models/";
  if (req.path.rfind(prefix, 0) != 0) {
    w.respond(json_response(200, {{"object", "list"}, {"data", json::array({model_json()})}}));
    return;
  }
  const std::string id = detinfer_http::percent_decode(req.path.substr(prefix.size()));
  if (id != model_name_) return w.respond(error_response(model_not_found(id, model_name_)));
  w.respond(json_response(200, model_json()));
}

void ServeApp::health(const Request&, ResponseWriter& w) {
  if (hooks_ != nullptr) {
    const auto [status, body] = hooks_->health(stopping_);
    w.respond(json_response(status, body));
    return;
  }
  const bool ok = !stopping_ && !session_.closed();
  w.respond(json_response(ok ? 200 : 503, {{"status", ok ? "ok" : "shutting_down"}}));
}

void ServeApp::metrics(const Request&, ResponseWriter& w) {
  Response r;
  r.content_type = detinfer::MetricsRegistry::content_type();
  r.body = hooks_ != nullptr ? hooks_->metrics_text() : session_.metrics_text();
  w.respond(std::move(r));
}

}  // namespace detinfer_cli
