// The handlers of ServeApp (serve_app.h) besides the request pipeline: models, health
// and metrics; and the completions dialect's renderer of the pipeline (serve_render.h).
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "serve_app.h"
#include "serve_render.h"
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

// text_completion bodies and chunks; with echo, each choice starts with the prompt.
class CompletionRenderer : public ResponseRenderer {
 public:
  using ResponseRenderer::ResponseRenderer;

  json whole(const detinfer::GenerationResult& result) override {
    return completion_response(in_.ctx, in_.req, result, in_.session, in_.full_fingerprint);
  }

  std::vector<json> opening(std::int32_t n) override {
    choices_.assign(static_cast<std::size_t>(n), {});
    for (auto& c : choices_) c.offset = in_.req.echo ? code_points(in_.req.prompt_text) : 0;
    std::vector<json> out;
    if (in_.req.echo) {
      for (std::int32_t i = 0; i < n; ++i)
        out.push_back(stream_chunk(in_.ctx, i, in_.req.prompt_text, nullptr));
    }
    return out;
  }

  std::optional<json> event(StreamEvent& ev) override {
    StreamChoiceState& st = choices_[static_cast<std::size_t>(ev.index)];
    if (ev.logprobs) st.pending.push_back(std::move(*ev.logprobs));
    if (ev.text.empty()) return std::nullopt;  // logprobs wait for the chunk that carries text
    return stream_text_chunk(in_.ctx, ev.index, ev.text, in_.req, st, in_.session);
  }

  std::vector<json> closing(const detinfer::GenerationResult& result) override {
    std::vector<json> out;
    for (std::size_t i = 0; i < result.sequences.size() && i < choices_.size(); ++i) {
      out.push_back(stream_final_chunk(in_.ctx, static_cast<std::int32_t>(i), result, in_.req,
                                       choices_[i], in_.session));
    }
    if (in_.req.include_usage) out.push_back(stream_usage_chunk(in_.ctx, result));
    return out;
  }

 private:
  std::vector<StreamChoiceState> choices_;
};

}  // namespace

std::unique_ptr<ResponseRenderer> completion_renderer(const RenderInput& in) {
  return std::make_unique<CompletionRenderer>(in);
}

bool ServeApp::refuse_when_stopping(ResponseWriter& w) {
  const bool stopping = stopping_;
  if (stopping) w.respond(error_response(503, "the server is shutting down"));
  return stopping;
}

bool ServeApp::wants_full_fingerprint(const Request& req) {
  return req.query_param("fingerprint") == "full" || req.header("X-Detinfer-Fingerprint") == "full";
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
