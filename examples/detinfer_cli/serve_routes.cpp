// The handlers of ServeApp (serve_app.h): completions (whole and streamed), models,
// health and metrics.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>

#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "serve_app.h"

namespace detinfer_cli {

using detinfer_http::Request;
using detinfer_http::Response;
using detinfer_http::ResponseWriter;
using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// What the engine thread hands to the HTTP worker of a streamed request, so that a slow
// client never stalls the engine.
struct StreamEvent {
  std::int32_t index = 0;
  std::string text;
  std::optional<detinfer::StepLogprobs> logprobs;
};
struct StreamQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;
  bool client_gone = false;
};

Response json_response(int status, const json& body) {
  Response r;
  r.status = status;
  r.body = dump(body);
  return r;
}

}  // namespace

void ServeApp::completions(const Request& req, ResponseWriter& w) {
  if (stopping_) {
    w.respond(error_response(503, "the server is shutting down"));
    return;
  }
  ParseOutcome parsed = parse_completion_request(req.body, model_name_, session_);
  if (!parsed.request) {
    w.respond(error_response(parsed.error));
    return;
  }
  const bool full_fp =
      req.query_param("fingerprint") == "full" || req.header("X-Detinfer-Fingerprint") == "full";
  auto creq = std::make_shared<CompletionRequest>(std::move(*parsed.request));
  const ResponseContext ctx = context();
  if (creq->stream) {
    stream(creq, ctx, w);
    return;
  }
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(creq->prompt, creq->config);
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
    r.body = dump(completion_response(ctx, *creq, result, session_, full_fp));
    w.respond(std::move(r));
  } catch (const detinfer::Error& e) {
    track(handle.get(), false);
    submit_error(e, w);
  }
}

void ServeApp::stream(std::shared_ptr<CompletionRequest> creq, const ResponseContext& ctx,
                      ResponseWriter& w) {
  // Submit first so that validation errors are still plain HTTP errors.
  auto queue = std::make_shared<StreamQueue>();
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(creq->prompt, creq->config, [queue](const detinfer::TokenEvent& ev) {
      StreamEvent e{ev.sample_index, ev.text, std::nullopt};
      if (ev.logprobs != nullptr) e.logprobs = *ev.logprobs;
      std::lock_guard<std::mutex> lock(queue->mu);
      queue->events.push_back(std::move(e));
      queue->cv.notify_one();
      return !queue->client_gone;
    });
  } catch (const detinfer::Error& e) {
    submit_error(e, w);
    return;
  }
  track(handle.get(), true);
  w.on_client_gone([queue, handle] {
    handle->cancel();
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->client_gone = true;
    queue->cv.notify_one();
  });
  bool client_ok = w.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  auto send = [&](const json& j) {
    if (client_ok) client_ok = w.write("data: " + dump(j) + "\n\n");
    if (!client_ok) handle->cancel();
  };
  const std::int32_t n = std::max(creq->config.num_return_sequences, creq->config.num_beams);
  std::vector<StreamChoiceState> choices(static_cast<std::size_t>(n));
  for (auto& c : choices) c.offset = creq->echo ? code_points(creq->prompt_text) : 0;
  if (creq->echo) {
    for (std::int32_t i = 0; i < n; ++i) send(stream_chunk(ctx, i, creq->prompt_text, nullptr));
  }
  auto& fut = handle->future();
  for (;;) {
    std::deque<StreamEvent> batch;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      queue->cv.wait_for(lock, std::chrono::milliseconds(20),
                         [&] { return !queue->events.empty() || queue->client_gone; });
      batch.swap(queue->events);
    }
    for (StreamEvent& ev : batch) {
      if (ev.index < 0 || ev.index >= n) continue;
      StreamChoiceState& st = choices[static_cast<std::size_t>(ev.index)];
      if (ev.logprobs) st.pending.push_back(std::move(*ev.logprobs));
      if (ev.text.empty()) continue;  // logprobs wait for the chunk that carries text
      send(stream_text_chunk(ctx, ev.index, ev.text, *creq, st, session_));
    }
    if (fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      std::lock_guard<std::mutex> lock(queue->mu);
      if (queue->events.empty()) break;  // else: drain what arrived meanwhile
    }
  }
  track(handle.get(), false);
  try {
    const detinfer::GenerationResult result = fut.get();
    for (std::size_t i = 0; i < result.sequences.size() && i < choices.size(); ++i) {
      json last = stream_final_chunk(ctx, static_cast<std::int32_t>(i), result, *creq, choices[i],
                                     session_);
      send(last);
    }
    if (creq->include_usage) send(stream_usage_chunk(ctx, result));
  } catch (const detinfer::Error& e) {
    send(error_body(from_error(e)));
  }
  if (client_ok) client_ok = w.write("data: [DONE]\n\n");
  w.finish();
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
  if (id != model_name_) {
    ApiError e;
    e.status = 404;
    e.code = "model_not_found";
    e.param = "model";
    e.message = "the model '" + id + "' does not exist; this server serves '" + model_name_ + "'";
    w.respond(error_response(e));
    return;
  }
  w.respond(json_response(200, model_json()));
}

void ServeApp::health(const Request&, ResponseWriter& w) {
  const bool ok = !stopping_ && !session_.closed();
  w.respond(json_response(ok ? 200 : 503, {{"status", ok ? "ok" : "shutting_down"}}));
}

void ServeApp::metrics(const Request&, ResponseWriter& w) {
  Response r;
  r.content_type = detinfer::MetricsRegistry::content_type();
  r.body = session_.metrics_text();
  w.respond(std::move(r));
}

}  // namespace detinfer_cli
