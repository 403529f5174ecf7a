// ServeApp's /v1/chat/completions (docs/chat.md, "Server"): the conversation is rendered
// through the model's chat template into token ids and submitted like a completion;
// streamed as chat.completion.chunk events (delta.role first, then delta.content, then
// the finish reason), stream_options.include_usage, then [DONE].
#include <optional>

#include "chat_protocol.h"
#include "detinfer/hash.h"
#include "serve_app.h"
#include "serve_stream.h"

namespace detinfer_cli {

using detinfer_http::Request;
using detinfer_http::ResponseWriter;
using nlohmann::json;

namespace {

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
  if (refuse_when_stopping(w)) return;
  ChatParseOutcome parsed = parse_chat_request(req.body, model_name_, session_);
  if (!parsed.request) return w.respond(error_response(parsed.error));
  const bool full_fp = wants_full_fingerprint(req);
  auto creq = std::make_shared<ChatRequest>(std::move(*parsed.request));
  ResponseContext ctx = context();
  ctx.id = "chatcmpl-" + ctx.id.substr(ctx.id.find('-') + 1);
  if (creq->completion.stream) {
    chat_stream(creq, ctx, w);
    return;
  }
  respond_whole(creq->completion.prompt, creq->completion.config, w,
                [&](const detinfer::GenerationResult& result) {
                  return chat_response(ctx, *creq, result, session_, full_fp);
                });
}

void ServeApp::chat_stream(std::shared_ptr<ChatRequest> creq, const ResponseContext& ctx,
                           ResponseWriter& w) {
  std::optional<EventStream> es;
  try {
    es.emplace(session_, creq->completion.prompt, creq->completion.config);
  } catch (const detinfer::Error& e) {
    submit_error(e, w);
    return;
  }
  track(es->handle(), true);
  es->start(w);
  const detinfer::GenerationConfig& c = creq->completion.config;
  const std::int32_t n = std::max(c.num_return_sequences, c.num_beams);
  // Held-back logprobs ride with the next chunk that carries text.
  std::vector<std::vector<detinfer::StepLogprobs>> pending(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    es->send(chat_chunk(ctx, i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
  }
  const detinfer::Tokenizer* tok = session_.tokenizer();
  es->drain([&](StreamEvent& ev) {
    if (ev.index < 0 || ev.index >= n) return;
    auto& held = pending[static_cast<std::size_t>(ev.index)];
    if (ev.logprobs) held.push_back(std::move(*ev.logprobs));
    if (ev.text.empty()) return;
    json lp = creq->logprobs ? chat_logprobs_json(held, creq->top_logprobs, tok) : json(nullptr);
    held.clear();
    es->send(chat_chunk(ctx, ev.index, {{"content", ev.text}}, std::move(lp), nullptr));
  });
  track(es->handle(), false);
  try {
    for (const json& j : final_chunks(ctx, *creq, es->result(), pending, tok)) es->send(j);
  } catch (const detinfer::Error& e) {
    es->send(error_body(from_error(e)));
  }
  es->finish();
}

}  // namespace detinfer_cli
