#include "chat_protocol.h"

#include <algorithm>

#include "detinfer/error.h"
#include "openai_fields.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {

// Keys /v1/chat/completions takes itself; the others are validated as for completions.
const char* const kChatOnly[] = {"messages",
                                 "tools",
                                 "tool_choice",
                                 "parallel_tool_calls",
                                 "chat_template_kwargs",
                                 "add_generation_prompt",
                                 "logprobs",
                                 "top_logprobs",
                                 "max_tokens",
                                 "max_completion_tokens",
                                 "response_format"};
// Completions-only keys a chat request must not carry.
const char* const kNotChat[] = {"prompt", "echo", "suffix", "best_of"};

bool has(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

detinfer::ChatTemplateOptions template_options(const json& body) {
  detinfer::ChatTemplateOptions o;
  if (has(body, "tools")) {
    if (!body["tools"].is_array()) reject("tools", "'tools' must be an array");
    o.tools_json = body["tools"].dump();
  }
  if (has(body, "tool_choice")) {
    const json& c = body["tool_choice"];
    if (c == "none") {
      o.tools_json.clear();  // the template sees no tools
    } else if (c != "auto") {
      reject("tool_choice", "only \"auto\" and \"none\" are supported (no constrained decoding)");
    }
  }
  if (has(body, "parallel_tool_calls") && !body["parallel_tool_calls"].is_boolean()) {
    reject("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
  }
  if (has(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object()) {
      reject("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    o.extra_variables_json = body["chat_template_kwargs"].dump();
  }
  if (has(body, "add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean()) {
      reject("add_generation_prompt", "'add_generation_prompt' must be a boolean");
    }
    o.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  if (has(body, "response_format")) {
    const json& f = body["response_format"];
    if (!f.is_object() || f.value("type", "") != "text") {
      reject("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  return o;
}

// The conversation's token ids; template and message errors become 400s naming the field.
std::vector<std::int32_t> render(const detinfer::DeterministicSession& session,
                                 const std::vector<detinfer::ChatMessage>& messages,
                                 const detinfer::ChatTemplateOptions& o) {
  try {
    return session.encode_chat(messages, o);
  } catch (const detinfer::Error& e) {
    std::string param = e.field().empty() ? "messages" : e.field();
    if (param == "extra_variables_json") param = "chat_template_kwargs";
    if (param == "chat_template" || param == "template_name") param = "messages";
    reject(param, e.message());
  }
}

// The completions body that validates the sampling fields: the request's own, then the
// model's defaults (generation_config.json) for what it omits.
json completion_body(const json& body, const std::vector<std::int32_t>& prompt,
                     const detinfer::DeterministicSession& session) {
  json c = json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (std::none_of(std::begin(kChatOnly), std::end(kChatOnly),
                     [&](const char* k) { return it.key() == k; })) {
      c[it.key()] = it.value();
    }
  }
  c["prompt"] = prompt;
  const detinfer::GenerationConfig d = session.default_generation_config();
  add_default_params(c, d);  // the model's defaults, where the request sets nothing
  const char* max_key = has(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (has(body, max_key)) {
    c["max_tokens"] = body[max_key];
  } else {  // the model's default, within the context the prompt leaves
    const std::int64_t room = session.context_length() - static_cast<std::int64_t>(prompt.size());
    c["max_tokens"] = std::max<std::int64_t>(1, std::min<std::int64_t>(d.max_new_tokens, room));
  }
  if (has(body, "logprobs")) {
    if (!body["logprobs"].is_boolean()) reject("logprobs", "'logprobs' must be a boolean");
  }
  if (has(body, "top_logprobs")) {
    if (!body.value("logprobs", false)) {
      reject("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    }
    c["logprobs"] = body["top_logprobs"];
  } else if (body.value("logprobs", false)) {
    c["logprobs"] = 0;
  }
  return c;
}

void check_keys(const json& body) {
  for (const char* k : kNotChat) {
    if (body.contains(k)) reject(k, std::string("unknown parameter '") + k + "'");
  }
  if (!has(body, "messages")) reject("messages", "'messages' is required");
  if (!body["messages"].is_array() || body["messages"].empty()) {
    reject("messages", "'messages' must be a non-empty array");
  }
}

}  // namespace

ChatParseOutcome parse_chat_request(const std::string& body_text, const std::string& served_model,
                                    const detinfer::DeterministicSession& session) {
  ChatParseOutcome out;
  try {
    const json body = parse_body(body_text);  // hardened: UTF-8, NUL, depth, 1e400
    if (!body.is_object()) reject("", "request body must be a JSON object");
    check_keys(body);
    ChatRequest req;
    try {
      req.messages = detinfer::chat_messages_from_json(body["messages"].dump());
    } catch (const detinfer::Error& e) {
      reject(e.field().empty() ? "messages" : e.field(), e.message());
    }
    req.template_options = template_options(body);
    const std::vector<std::int32_t> prompt = render(session, req.messages, req.template_options);
    const json cbody = completion_body(body, prompt, session);
    ParseOutcome p = parse_completion_request(cbody.dump(), served_model, session);
    if (!p.request) {
      ApiError e = p.error;
      if (e.param == "prompt") e.param = "messages";
      if (e.param == "logprobs" && has(body, "top_logprobs")) e.param = "top_logprobs";
      if (e.param == "max_tokens" && has(body, "max_completion_tokens")) {
        e.param = "max_completion_tokens";
      }
      out.error = e;
      return out;
    }
    req.completion = std::move(*p.request);
    req.logprobs = body.value("logprobs", false);
    req.top_logprobs = req.logprobs ? req.completion.logprobs : 0;
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

json chat_response(const ResponseContext& ctx, const ChatRequest& req,
                   const detinfer::GenerationResult& result,
                   const detinfer::DeterministicSession& session, bool full_fingerprint) {
  CompletionRequest plain = req.completion;  // usage and detinfer's fields, as completions
  plain.echo = false;
  plain.logprobs_requested = false;
  json r = completion_response(ctx, plain, result, session, full_fingerprint);
  json choices = json::array();
  for (std::size_t i = 0; i < result.sequences.size(); ++i) {
    const detinfer::Sequence& s = result.sequences[i];
    choices.push_back({{"index", i},
                       {"message", {{"role", "assistant"}, {"content", s.text}}},
                       {"logprobs", req.logprobs ? chat_logprobs_json(s.logprobs, req.top_logprobs,
                                                                      session.tokenizer())
                                                 : json(nullptr)},
                       {"finish_reason", detinfer::to_string(s.finish_reason)}});
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
