#include "chat_protocol.h"

#include <algorithm>
#include <ctime>

#include "core/byte_budget.h"
#include "core/generation_fields.h"
#include "core/json_parse.h"
#include "detinfer/error.h"
#include "detinfer/transcript.h"
#include "openai_fields.h"
#include "response_format_param.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {

bool has(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// `ordered` is the body with the client's key order: tools and chat_template_kwargs reach
// the template as sent (transformers keeps a dict's insertion order).
detinfer::ChatTemplateOptions template_options(const json& body,
                                               const nlohmann::ordered_json& ordered,
                                               ServeRequest& req) {
  detinfer::ChatTemplateOptions o;
  o.tools_json = read_tool_params(body, ordered, req);  // "" when none (tool_choice "none")
  if (has(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object()) {
      reject("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    o.extra_variables_json = ordered["chat_template_kwargs"].dump();
  }
  if (has(body, "add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean()) {
      reject("add_generation_prompt", "'add_generation_prompt' must be a boolean");
    }
    o.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  return o;
}

// The conversation's token ids; message and template errors become 400s naming the
// field (request_param(): the template's own fields under the request's names).
std::vector<std::int32_t> render(const detinfer::DeterministicSession& session, const json& body,
                                 const nlohmann::ordered_json& ordered, ServeRequest& req) {
  const ParamNames& names = req.names;
  if (!has(body, "messages")) reject("messages", "'messages' is required");
  if (!body["messages"].is_array() || body["messages"].empty()) {
    reject("messages", "'messages' must be a non-empty array");
  }
  detinfer::ChatTemplateOptions o = template_options(body, ordered, req);
  // The clock is read once: the transcript's conversation renders to this prompt.
  o.now_unix_seconds = static_cast<std::int64_t>(std::time(nullptr));
  std::vector<std::int32_t> ids;
  try {
    const auto messages = detinfer::chat_messages_from_json(ordered["messages"].dump());
    ids = session.encode_chat(messages, o);
    req.chat = detinfer::transcript_chat(messages, o);
  } catch (const detinfer::Error& e) {
    reject(e.field().empty() ? "messages" : request_param(e.field(), names), e.message());
  }
  if (ids.empty()) reject("messages", "the conversation renders to no tokens");
  return ids;
}

// "logprobs": true and "top_logprobs" (0..20, needs logprobs).
void parse_logprobs(const json& body, ServeRequest& req) {
  if (has(body, "logprobs") && !body["logprobs"].is_boolean()) {
    reject("logprobs", "'logprobs' must be a boolean");
  }
  req.chat_logprobs = has(body, "logprobs") && body["logprobs"].get<bool>();
  if (has(body, "top_logprobs")) {
    if (!req.chat_logprobs) reject("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    const json& t = body["top_logprobs"];
    if (!t.is_number_integer() && !t.is_number_unsigned()) {
      reject("top_logprobs", "'top_logprobs' must be an integer");
    }
    const double v = t.get<double>();
    if (v < 0 || v > detinfer::core::kMaxLogprobs) {
      reject("top_logprobs", "'top_logprobs' must be in [0, 20], got " + t.dump());
    }
    req.top_logprobs = t.get<std::int32_t>();
  }
  if (req.chat_logprobs) {
    req.config.logprobs = std::max(req.top_logprobs, 1);
    req.sources.set("logprobs", FieldSource::kClient);
  }
}

// Issue 33: parsing, rendering and tokenizing a chat body holds up to ~kCostPerByte times
// its size at the peak (a 1 MB body: tens of MB). Concurrent parses share one budget (64
// concurrent 1 MB bodies took the server to 2-3 GB), and a large one gives the freed heap
// back when it is done (glibc kept it: RSS stayed at 1-3 GB while idle).
constexpr std::int64_t kCostPerByte = 32;
constexpr std::int64_t kLargeBody = 64 << 10;

detinfer::core::ByteBudget& parse_budget() {
  static detinfer::core::ByteBudget budget(std::int64_t{256} << 20);
  return budget;
}

}  // namespace

ParseOutcome parse_chat_request(const std::string& body_text, const std::string& served_model,
                                const detinfer::DeterministicSession& session) {
  const detinfer::core::ByteBudget::Lease lease(
      parse_budget(), kCostPerByte * static_cast<std::int64_t>(body_text.size()),
      kCostPerByte * kLargeBody);
  ParseOutcome out;
  try {
    const json body = parse_body(body_text);  // hardened: UTF-8, NUL, depth, 1e400
    check_request_keys(body, served_model, Dialect::kChat);
    // The same text keeping its key order (parse_body already checked it; nlohmann::json
    // sorts keys, which would reorder tools and tool-call arguments).
    const nlohmann::ordered_json ordered =
        detinfer::core::parse_json_ordered(body_text, {64, body_text.size() + 1, true},
                                           detinfer::ErrorCode::kInvalidArgument, "request body");
    ServeRequest req;
    req.names.dialect = Dialect::kChat;
    // max_completion_tokens wins over max_tokens; errors name the one the client sent.
    if (has(body, "max_completion_tokens")) req.names.max_tokens = "max_completion_tokens";
    const std::vector<std::int32_t> ids = render(session, body, ordered, req);
    req.prompt = detinfer::Prompt(ids);
    req.prompt_is_text = false;
    const detinfer::GenerationConfig defaults = session.default_generation_config();
    parse_sampling(body, model_limits(session), &defaults, req);
    keep_schema_order(ordered, req.config.response_format);
    if (!req.sources.given("max_new_tokens")) {  // the model's, within the context left
      const std::int64_t room = session.context_length() - static_cast<std::int64_t>(ids.size());
      req.config.max_new_tokens = static_cast<std::int32_t>(
          std::max<std::int64_t>(1, std::min<std::int64_t>(defaults.max_new_tokens, room)));
    }
    parse_logprobs(body, req);
    parse_stream(body, req);
    apply_tool_request(session, req);  // after the sampling fields: response_format
    out.request = std::move(req);
  } catch (const ApiError& e) {
    out.error = e;
  }
  return out;
}

}  // namespace detinfer_cli

namespace detinfer_cli {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
std::size_t utf8_sequence(const std::string& s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80           ? 1
                  : (c >> 5) == 0x6  ? 2
                  : (c >> 4) == 0xE  ? 3
                  : (c >> 3) == 0x1E ? 4
                                     : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

json token_entry(std::int32_t token, float logprob, const detinfer::Tokenizer* tokenizer) {
  const std::string text = tokenizer != nullptr ? tokenizer->decode({token}, false) : "";
  std::string shown;
  json bytes = json::array();
  for (const char ch : text) bytes.push_back(static_cast<unsigned char>(ch));
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i);
    shown += n == 0 ? std::string("\xEF\xBF\xBD") : text.substr(i, n);
    i += n == 0 ? 1 : n;
  }
  if (tokenizer == nullptr) shown = "token_id:" + std::to_string(token);
  return {{"token", shown}, {"logprob", logprob}, {"bytes", bytes}};
}

}  // namespace

json chat_logprobs_json(const std::vector<detinfer::StepLogprobs>& steps, std::int32_t top_n,
                        const detinfer::Tokenizer* tokenizer) {
  json content = json::array();
  for (const detinfer::StepLogprobs& st : steps) {
    json entry = token_entry(st.token, st.logprob, tokenizer);
    json top = json::array();
    const std::size_t n = std::min<std::size_t>(st.top.size(), static_cast<std::size_t>(top_n));
    for (std::size_t k = 0; k < n; ++k) {
      top.push_back(token_entry(st.top[k].token, st.top[k].logprob, tokenizer));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

json chat_response(const ResponseContext& ctx, const ServeRequest& req,
                   const detinfer::GenerationResult& result,
                   const detinfer::DeterministicSession& session, bool full_fingerprint) {
  ServeRequest plain = req;  // usage and detinfer's fields, as completions
  plain.echo = false;
  plain.logprobs_requested = false;
  json r = completion_response(ctx, plain, result, session, full_fingerprint);
  json choices = json::array();
  for (std::size_t i = 0; i < result.sequences.size(); ++i) {
    const detinfer::Sequence& s = result.sequences[i];
    ToolMessage m =
        tool_message(req.tools, result.seed, static_cast<std::int32_t>(i), s.text, s.finish_reason);
    json message = {{"role", "assistant"}, {"content", std::move(m.content)}};
    if (!m.tool_calls.empty()) message["tool_calls"] = std::move(m.tool_calls);
    choices.push_back(
        {{"index", i},
         {"message", std::move(message)},
         {"logprobs", req.chat_logprobs
                          ? chat_logprobs_json(s.logprobs, req.top_logprobs, session.tokenizer())
                          : json(nullptr)},
         {"finish_reason", m.finish_reason}});
  }
  if (req.tools.parse) r["detinfer"]["tool_call_format"] = to_string(req.tools.format);
  if (req.chat && r["detinfer"].contains("transcript")) {  // the messages form (format /2)
    detinfer::Transcript t = detinfer::Transcript::from_json(r["detinfer"]["transcript"].dump());
    t.chat = req.chat;
    r["detinfer"]["transcript"] = json::parse(t.to_json());
  }
  r["object"] = "chat.completion";
  r["choices"] = std::move(choices);
  return r;
}

json chat_chunk(const ResponseContext& ctx, std::int32_t index, json delta, json logprobs,
                const char* finish_reason) {
  json choice = {{"index", index},
                 {"delta", std::move(delta)},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
  return {{"id", ctx.id},
          {"object", "chat.completion.chunk"},
          {"created", ctx.created},
          {"model", ctx.model},
          {"system_fingerprint", ctx.system_fingerprint},
          {"choices", json::array({std::move(choice)})}};
}

json chat_usage_chunk(const ResponseContext& ctx, const detinfer::GenerationResult& result) {
  json j = stream_usage_chunk(ctx, result);  // completions' usage chunk, as a chat chunk
  j["object"] = "chat.completion.chunk";
  return j;
}

}  // namespace detinfer_cli
