// Logprobs, stream chunks and body parsing of the OpenAI wire format
// (openai_protocol.h).
#include <algorithm>
#include <set>

#include "core/json_parse.h"
#include "detinfer/hash.h"
#include "openai_protocol.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
// Returns the byte offset of the first invalid sequence, or npos.
std::size_t invalid_utf8_at(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string::npos;
}

[[noreturn]] void bad_body(const std::string& message) {
  ApiError e;
  e.message = message;
  throw e;
}

std::string token_text(const detinfer::Tokenizer* tok, std::int32_t id) {
  return tok != nullptr ? tok->decode({id}) : std::to_string(id);
}

}  // namespace

std::size_t code_points(const std::string& utf8) {
  return static_cast<std::size_t>(std::count_if(utf8.begin(), utf8.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }));
}

json logprobs_json(const std::vector<detinfer::StepLogprobs>& steps, std::int32_t top_n,
                   const detinfer::Tokenizer* tok, std::size_t& offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& st : steps) {
    const std::string p = token_text(tok, st.token);
    tokens.push_back(p);
    token_logprobs.push_back(st.logprob);
    json t = json::object();
    const std::size_t n = std::min(st.top.size(), static_cast<std::size_t>(std::max(top_n, 0)));
    for (std::size_t k = 0; k < n; ++k) {
      std::string key = token_text(tok, st.top[k].token);
      if (invalid_utf8_at(key) != std::string::npos || t.contains(key)) {
        key = "token_id:" + std::to_string(st.top[k].token);
      }
      t[key] = st.top[k].logprob;
    }
    top.push_back(t);
    offsets.push_back(offset);
    offset += code_points(p);
  }
  return json{{"tokens", tokens},
              {"token_logprobs", token_logprobs},
              {"top_logprobs", top},
              {"text_offset", offsets}};
}

json stream_chunk(const ResponseContext& ctx, std::int32_t index, const std::string& text,
                  const char* finish_reason, json logprobs) {
  json choice = {{"text", text}, {"index", index}, {"logprobs", std::move(logprobs)}};
  choice["finish_reason"] = finish_reason != nullptr ? json(finish_reason) : json(nullptr);
  return json{{"id", ctx.id},
              {"object", "text_completion"},
              {"created", ctx.created},
              {"model", ctx.model},
              {"system_fingerprint", ctx.system_fingerprint},
              {"choices", json::array({choice})}};
}

namespace {
json take_pending(const CompletionRequest& req, StreamChoiceState& state,
                  const detinfer::DeterministicSession& session) {
  if (!req.logprobs_requested) return nullptr;
  json lp = logprobs_json(state.pending, req.logprobs, session.tokenizer(), state.offset);
  state.pending.clear();
  return lp;
}
}  // namespace

json stream_text_chunk(const ResponseContext& ctx, std::int32_t index, const std::string& text,
                       const CompletionRequest& req, StreamChoiceState& state,
                       const detinfer::DeterministicSession& session) {
  return stream_chunk(ctx, index, text, nullptr, take_pending(req, state, session));
}

json stream_final_chunk(const ResponseContext& ctx, std::int32_t index,
                        const detinfer::GenerationResult& result, const CompletionRequest& req,
                        StreamChoiceState& state, const detinfer::DeterministicSession& session) {
  const detinfer::Sequence& s = result.sequences[static_cast<std::size_t>(index)];
  json lp = state.pending.empty() ? json(nullptr) : take_pending(req, state, session);
  json last = stream_chunk(ctx, index, "", detinfer::to_string(s.finish_reason), std::move(lp));
  last["detinfer"] = {{"seed", result.seed}, {"digest", detinfer::hex64(s.digest)}};
  return last;
}

json stream_usage_chunk(const ResponseContext& ctx, const detinfer::GenerationResult& result) {
  std::int64_t completion = 0;
  for (const auto& s : result.sequences) completion += static_cast<std::int64_t>(s.tokens.size());
  const auto prompt = static_cast<std::int64_t>(result.prompt_tokens.size());
  return json{{"id", ctx.id},
              {"object", "text_completion"},
              {"created", ctx.created},
              {"model", ctx.model},
              {"system_fingerprint", ctx.system_fingerprint},
              {"choices", json::array()},
              {"usage",
               {{"prompt_tokens", prompt},
                {"completion_tokens", completion},
                {"total_tokens", prompt + completion}}}};
}

json parse_body(const std::string& text) {
  // The library's hardened reader (src/core/json_parse.h, compiled into this program):
  // NUL bytes, invalid UTF-8, nesting deeper than 64, duplicate keys and numbers beyond
  // a double are errors naming the byte, never "last wins" or a 500.
  detinfer::core::JsonLimits limits;
  limits.max_depth = 64;
  limits.max_bytes = text.size() + 1;  // the transport already bounded the body
  try {
    return detinfer::core::parse_json(text, limits, detinfer::ErrorCode::kInvalidArgument,
                                      "request body");
  } catch (const detinfer::Error& e) {
    bad_body(e.message());
  }
}

}  // namespace detinfer_cli
