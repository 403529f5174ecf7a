// ServeApp's /v1/chat/completions (docs/chat.md, "Server"): the conversation is rendered
// through the model's chat template into token ids and submitted like a completion;
// streamed as chat.completion.chunk events (delta.role first, then delta.content, then
// the finish reason), stream_options.include_usage, then [DONE].
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>

#include "chat_protocol.h"
#include "detinfer/hash.h"
#include "serve_app.h"

namespace detinfer_cli {

using detinfer_http::Request;
using detinfer_http::Response;
using detinfer_http::ResponseWriter;
using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Tokens handed from the engine thread to the HTTP worker of a streamed chat request.
struct ChatEvent {
  std::int32_t index = 0;
  std::string text;
  std::optional<detinfer::StepLogprobs> logprobs;
};
struct ChatQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ChatEvent> events;
  bool client_gone = false;
};

// The last chunk of each choice (finish reason, held-back logprobs, seed and digest),
// then the usage chunk when asked.
std::vector<json> final_chunks(const ResponseContext& ctx, const ChatRequest& creq,
                               const detinfer::GenerationResult& result,
                               const std::vector<std::vector<detinfer::StepLogprobs>>& pending,
                               const detinfer::Tokenizer* tok) {
  std::vector<json> out;
  for (std::size_t i = 0; i < result.sequences.size() && i < pending.size(); ++i) {
    const detinfer::Sequence& s = result.sequences[i];
    json lp = creq.logprobs && !pending[i].empty()
                  ? chat_logprobs_json(pending[i], creq.top_logprobs, tok)
                  : json(nullptr);
    json last = chat_chunk(ctx, static_cast<std::int32_t>(i), json::object(), std::move(lp),
                           detinfer::to_string(s.finish_reason));
    last["detinfer"] = {{"seed", result.seed}, {"digest", detinfer::hex64(s.digest)}};
    out.push_back(std::move(last));
  }
  if (creq.completion.include_usage) out.push_back(chat_usage_chunk(ctx, result));
  return out;
}

}  // namespace

void ServeApp::chat_completions(const Request& req, ResponseWriter& w) {
  if (stopping_) {
    w.respond(error_response(503, "the server is shutting down"));
    return;
  }
  ChatParseOutcome parsed = parse_chat_request(req.body, model_name_, session_);
  if (!parsed.request) {
    w.respond(error_response(parsed.error));
    return;
  }
  const bool full_fp =
      req.query_param("fingerprint") == "full" || req.header("X-Detinfer-Fingerprint") == "full";
  auto creq = std::make_shared<ChatRequest>(std::move(*parsed.request));
  ResponseContext ctx = context();
  ctx.id = "chatcmpl-" + ctx.id.substr(ctx.id.find('-') + 1);
  if (creq->completion.stream) {
    chat_stream(creq, ctx, w);
    return;
  }
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(creq->completion.prompt, creq->completion.config);
  } catch (const detinfer::Error& e) {
    submit_error(e, w);
    return;
  }
  track(handle.get(), true);
  w.on_client_gone([handle] { handle->cancel(); });
  try {
    const detinfer::GenerationResult result = handle->get();
    track(handle.get(), false);
    Response r;
    r.body = dump(chat_response(ctx, *creq, result, session_, full_fp));
    w.respond(std::move(r));
  } catch (const detinfer::Error& e) {
    track(handle.get(), false);
    submit_error(e, w);
  }
}

void ServeApp::chat_stream(std::shared_ptr<ChatRequest> creq, const ResponseContext& ctx,
                           ResponseWriter& w) {
  auto queue = std::make_shared<ChatQueue>();
  auto handle = std::make_shared<detinfer::RequestHandle>();
  try {
    *handle = session_.submit(creq->completion.prompt, creq->completion.config,
                              [queue](const detinfer::TokenEvent& ev) {
                                ChatEvent e{ev.sample_index, ev.text, std::nullopt};
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
  const detinfer::GenerationConfig& c = creq->completion.config;
  const std::int32_t n = std::max(c.num_return_sequences, c.num_beams);
  // Held-back logprobs ride with the next chunk that carries text.
  std::vector<std::vector<detinfer::StepLogprobs>> pending(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    send(chat_chunk(ctx, i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
  }
  auto& fut = handle->future();
  const detinfer::Tokenizer* tok = session_.tokenizer();
  for (;;) {
    std::deque<ChatEvent> batch;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      queue->cv.wait_for(lock, std::chrono::milliseconds(20),
                         [&] { return !queue->events.empty() || queue->client_gone; });
      batch.swap(queue->events);
    }
    for (ChatEvent& ev : batch) {
      if (ev.index < 0 || ev.index >= n) continue;
      auto& held = pending[static_cast<std::size_t>(ev.index)];
      if (ev.logprobs) held.push_back(std::move(*ev.logprobs));
      if (ev.text.empty()) continue;
      json lp = creq->logprobs ? chat_logprobs_json(held, creq->top_logprobs, tok) : json(nullptr);
      held.clear();
      send(chat_chunk(ctx, ev.index, {{"content", ev.text}}, std::move(lp), nullptr));
    }
    if (fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      std::lock_guard<std::mutex> lock(queue->mu);
      if (queue->events.empty()) break;
    }
  }
  track(handle.get(), false);
  try {
    for (const json& j : final_chunks(ctx, *creq, fut.get(), pending, tok)) send(j);
  } catch (const detinfer::Error& e) {
    send(error_body(from_error(e)));
  }
  if (client_ok) client_ok = w.write("data: [DONE]\n\n");
  w.finish();
}

}  // namespace detinfer_cli
