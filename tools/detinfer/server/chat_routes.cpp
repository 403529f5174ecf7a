// The chat dialect's renderer of the one pipeline (serve_render.h, docs/chat.md
// "Server"): chat.completion for a whole answer; streamed as chat.completion.chunk events
// (delta.role first, then delta.content, then the finish reason; with tools the text is
// held from where a call could start and parsed at the end: delta.content, then
// delta.tool_calls, then "tool_calls"),
// stream_options.include_usage, then [DONE].
#include <utility>

#include "chat_protocol.h"
#include "detinfer/hash.h"
#include "serve_render.h"
#include "tool_params.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {

class ChatRenderer : public ResponseRenderer {
 public:
  using ResponseRenderer::ResponseRenderer;

  json whole(const detinfer::GenerationResult& result) override {
    return chat_response(in_.ctx, in_.req, result, in_.session, in_.full_fingerprint);
  }

  std::vector<json> opening(std::int32_t n) override {
    pending_.assign(static_cast<std::size_t>(n), {});
    text_.assign(static_cast<std::size_t>(n), {});
    sent_.assign(static_cast<std::size_t>(n), 0);
    std::vector<json> out;
    for (std::int32_t i = 0; i < n; ++i) {
      out.push_back(
          chat_chunk(in_.ctx, i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
    }
    return out;
  }

  std::optional<json> event(StreamEvent& ev) override {
    auto& held = pending_[static_cast<std::size_t>(ev.index)];
    if (ev.logprobs) held.push_back(std::move(*ev.logprobs));
    if (ev.text.empty()) return std::nullopt;
    std::string text = ev.text;
    if (in_.req.tools.parse && !content_ahead(ev.index, text)) return std::nullopt;
    json lp = in_.req.chat_logprobs
                  ? chat_logprobs_json(held, in_.req.top_logprobs, in_.session.tokenizer())
                  : json(nullptr);
    held.clear();
    return chat_chunk(in_.ctx, ev.index, {{"content", std::move(text)}}, std::move(lp), nullptr);
  }

  // The last chunk of each choice (finish reason, held-back logprobs, seed and digest),
  // then the usage chunk when asked.
  std::vector<json> closing(const detinfer::GenerationResult& result) override {
    std::vector<json> out;
    for (std::size_t i = 0; i < result.sequences.size() && i < pending_.size(); ++i) {
      const detinfer::Sequence& s = result.sequences[i];
      const auto index = static_cast<std::int32_t>(i);
      json lp = in_.req.chat_logprobs && !pending_[i].empty()
                    ? chat_logprobs_json(pending_[i], in_.req.top_logprobs, in_.session.tokenizer())
                    : json(nullptr);
      const char* finish = detinfer::to_string(s.finish_reason);
      if (in_.req.tools.parse) finish = held_message(result, index, lp, out);
      json last = chat_chunk(in_.ctx, index, json::object(), std::move(lp), finish);
      last["detinfer"] = {{"seed", result.seed}, {"digest", detinfer::hex64(s.digest)}};
      out.push_back(std::move(last));
    }
    if (in_.req.include_usage) out.push_back(chat_usage_chunk(in_.ctx, result));
    return out;
  }

 private:
  // With tools, the text is held from where a call could start (a forced call: all of
  // it) and parsed at the end; before that it is content (chat::content_prefix_length).
  // Adds `text` to choice `index`'s and replaces it by the content it lets out, if any.
  bool content_ahead(std::int32_t index, std::string& text) {
    const auto i = static_cast<std::size_t>(index);
    text_[i] += text;
    if (in_.req.tools.forced) return false;
    const std::size_t n = detinfer::chat::content_prefix_length(text_[i], in_.req.tools.format);
    if (n <= sent_[i]) return false;
    text = text_[i].substr(sent_[i], n - sent_[i]);
    sent_[i] = n;
    return true;
  }

  // With tools: the held text of choice `index` as a content chunk (with the held
  // logprobs, `lp`, which it consumes) when it has content, then one chunk with its tool
  // calls when it made any (OpenAI's delta.tool_calls[], each with its index, id, type,
  // name and whole arguments). Returns the finish reason.
  const char* held_message(const detinfer::GenerationResult& result, std::int32_t index, json& lp,
                           std::vector<json>& out) const {
    const detinfer::Sequence& s = result.sequences[static_cast<std::size_t>(index)];
    ToolMessage m = tool_message(in_.req.tools, result.seed, index, s.text, s.finish_reason);
    const std::size_t sent = sent_[static_cast<std::size_t>(index)];
    if (m.content.is_string() && m.content.get<std::string>().size() > sent) {
      out.push_back(chat_chunk(in_.ctx, index,
                               {{"content", m.content.get<std::string>().substr(sent)}},
                               std::exchange(lp, json(nullptr)), nullptr));
    }
    if (!m.tool_calls.empty()) {
      for (std::size_t k = 0; k < m.tool_calls.size(); ++k) m.tool_calls[k]["index"] = k;
      out.push_back(chat_chunk(in_.ctx, index, {{"tool_calls", std::move(m.tool_calls)}},
                               std::exchange(lp, json(nullptr)), nullptr));
    }
    return m.finish_reason;
  }

  // Per choice, with tools: the text so far and how much of it was sent as content.
  std::vector<std::string> text_;
  std::vector<std::size_t> sent_;
  // Per choice: logprobs held back until a chunk carries text.
  std::vector<std::vector<detinfer::StepLogprobs>> pending_;
};

}  // namespace

std::unique_ptr<ResponseRenderer> chat_renderer(const RenderInput& in) {
  return std::make_unique<ChatRenderer>(in);
}

}  // namespace detinfer_cli
