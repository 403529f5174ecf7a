#include "openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/json_parse.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/version.h"
#include "openai_fields.h"
#include "response_format_param.h"
#include "speculative_param.h"

namespace detinfer_cli {

using nlohmann::json;

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", err}};
}

void reject(const std::string& param, const std::string& message, int status) {
  ApiError e;
  e.status = status;
  e.param = param;
  e.message = message;
  throw e;
}

ApiError model_not_found(const std::string& model, const std::string& served_model) {
  ApiError e;
  e.status = 404;
  e.param = "model";
  e.code = "model_not_found";
  e.message = "the model '" + model + "' does not exist; this server serves '" + served_model + "'";
  return e;
}

namespace {

std::int64_t get_int(const json& body, const char* key, std::int64_t lo, std::int64_t hi,
                     std::int64_t def) {
  if (!body.contains(key) || body[key].is_null()) return def;
  const json& v = body[key];
  if (!v.is_number_integer() && !v.is_number_unsigned()) {
    reject(key, std::string("'") + key + "' must be an integer");
  }
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    reject(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got " + v.dump());
  }
  const std::int64_t i = v.get<std::int64_t>();
  if (i < lo || i > hi) {
    reject(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got " + v.dump());
  }
  return i;
}

bool get_bool(const json& body, const char* key, bool def) {
  if (!body.contains(key) || body[key].is_null()) return def;
  if (!body[key].is_boolean()) reject(key, std::string("'") + key + "' must be a boolean");
  return body[key].get<bool>();
}

// The parameters that are not GenerationConfig fields (those are is_generation_param):
// every dialect's, then each dialect's own.
const char* const kCommonParams[] = {"model", "stream",     "stream_options",
                                     "user",  "logit_bias", "speculative"};
const char* const kCompletionParams[] = {"prompt", "echo", "best_of", "suffix"};
const char* const kChatParams[] = {"messages",
                                   "tools",
                                   "tool_choice",
                                   "parallel_tool_calls",
                                   "chat_template_kwargs",
                                   "add_generation_prompt",
                                   "logprobs",
                                   "top_logprobs",
                                   "max_completion_tokens"};

template <std::size_t N>
bool in(const char* const (&list)[N], const std::string& key) {
  for (const char* k : list) {
    if (key == k) return true;
  }
  return false;
}

bool known_param(const std::string& key, Dialect dialect) {
  if (is_generation_param(key) || in(kCommonParams, key)) return true;
  return dialect == Dialect::kChat ? in(kChatParams, key) : in(kCompletionParams, key);
}

}  // namespace

ModelLimits model_limits(const detinfer::DeterministicSession& session) {
  return {session.vocab_size(), session.context_length(), session.tokenizer()};
}

void check_request_keys(const json& body, const std::string& served_model, Dialect dialect) {
  if (!body.is_object()) reject("", "request body must be a JSON object");
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (!known_param(it.key(), dialect)) reject(it.key(), "unknown parameter '" + it.key() + "'");
  }
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) reject("model", "'model' must be a string");
    const std::string m = body["model"].get<std::string>();
    if (m != served_model) throw model_not_found(m, served_model);
  }
  for (const char* unsupported : {"suffix", "logit_bias"}) {
    if (body.contains(unsupported) && !body[unsupported].is_null()) {
      reject(unsupported, std::string("'") + unsupported + "' is not supported");
    }
  }
  if (body.contains("best_of") && !body["best_of"].is_null()) {
    const std::int64_t best_of = get_int(body, "best_of", 1, 1, 1);
    (void)best_of;
  }
}

namespace {

void parse_prompt(const json& body, const ModelLimits& model, CompletionRequest& req) {
  if (!body.contains("prompt") || body["prompt"].is_null())
    reject("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) {
    req.prompt_text = p.get<std::string>();
    req.prompt = detinfer::Prompt(req.prompt_text);
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    req.prompt_text = p[0].get<std::string>();
    req.prompt = detinfer::Prompt(req.prompt_text);
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    std::vector<std::int32_t> ids;
    for (const json& t : p) {
      if (!t.is_number_integer() && !t.is_number_unsigned()) {
        reject("prompt", "'prompt' token arrays must hold integers");
      }
      const std::int64_t v = t.get<std::int64_t>();
      if (v < 0 || v >= model.vocab_size) {
        reject("prompt", "token id " + std::to_string(v) + " is out of range [0, " +
                             std::to_string(model.vocab_size) + ")");
      }
      ids.push_back(static_cast<std::int32_t>(v));
    }
    req.prompt_is_text = false;
    req.prompt = detinfer::Prompt(ids);
    if (model.tokenizer != nullptr) req.prompt_text = model.tokenizer->decode(ids);
  } else if (p.is_array() && p.size() > 1) {
    reject("prompt", "only one prompt per request is supported");
  } else {
    reject("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (req.prompt_is_text && req.prompt_text.empty()) reject("prompt", "'prompt' is empty");
  if (req.prompt_is_text && model.tokenizer == nullptr) {
    reject("prompt", "this model has no tokenizer: send the prompt as token ids");
  }
}

void parse_stop(const json& body, ServeRequest& req) {
  detinfer::GenerationConfig& c = req.config;
  if (!body.contains("stop") || body["stop"].is_null()) return;
  req.sources.set("stop_strings", FieldSource::kClient);
  const json& s = body["stop"];
  if (s.is_string()) {
    c.stop_strings.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > 4) reject("stop", "'stop' takes at most 4 sequences");
    for (const json& x : s) {
      if (!x.is_string()) reject("stop", "'stop' must be a string or an array of strings");
      c.stop_strings.push_back(x.get<std::string>());
    }
  } else {
    reject("stop", "'stop' must be a string or an array of strings");
  }
  for (const auto& x : c.stop_strings) {
    if (x.empty()) reject("stop", "'stop' sequences must not be empty");
  }
}

}  // namespace

void parse_sampling(const json& body, const ModelLimits& model,
                    const detinfer::GenerationConfig* model_defaults, ServeRequest& req) {
  detinfer::GenerationConfig& c = req.config;
  resolve_generation_params(body, model, model_defaults, req.names, c, req.sources);
  read_speculative(body, c, req.sources);
  if (body.contains("seed") && !body["seed"].is_null()) {
    const json& s = body["seed"];
    if (s.is_number_unsigned()) {
      c.seed = s.get<std::uint64_t>();
    } else if (s.is_number_integer()) {
      // OpenAI clients send signed 64-bit seeds; the bits are kept.
      c.seed = static_cast<std::uint64_t>(s.get<std::int64_t>());
    } else {
      reject("seed", "'seed' must be an integer");
    }
    req.sources.set("seed", FieldSource::kClient);
  }
  parse_stop(body, req);
}

void parse_stream(const json& body, ServeRequest& req) {
  req.stream = get_bool(body, "stream", false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object()) reject("stream_options", "'stream_options' must be an object");
    for (auto it = so.begin(); it != so.end(); ++it) {
      if (it.key() != "include_usage") {
        reject("stream_options", "unknown stream option '" + it.key() + "'");
      }
    }
    if (!req.stream) reject("stream_options", "'stream_options' needs \"stream\": true");
    req.include_usage = get_bool(so, "include_usage", false);
  }
  if (req.stream && req.config.num_beams > 1) {
    reject("stream", "'stream' cannot be used with num_beams > 1");
  }
}

namespace {

// logprobs and echo.
void parse_output(const json& body, CompletionRequest& req) {
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    req.logprobs = static_cast<std::int32_t>(get_int(body, "logprobs", 0, 20, 0));
    req.logprobs_requested = true;
    req.sources.set("logprobs", FieldSource::kClient);
    // logprobs 0 still returns the sampled token's logprob (with empty top lists).
    req.config.logprobs = std::max(req.logprobs, 1);
  }
  req.echo = get_bool(body, "echo", false);
}

}  // namespace

ParseOutcome parse_completion_request(const std::string& body_text, const std::string& served_model,
                                      const ModelLimits& model) {
  ParseOutcome out;
  try {
    const json body = parse_body(body_text);
    check_request_keys(body, served_model, Dialect::kCompletion);
    ServeRequest req;
    parse_prompt(body, model, req);
    parse_sampling(body, model, nullptr, req);
    if (req.config.response_format.type == detinfer::ResponseFormatType::kJsonSchema) {
      keep_schema_order(
          detinfer::core::parse_json_ordered(body_text, {64, body_text.size() + 1, true},
                                             detinfer::ErrorCode::kInvalidArgument, "request body"),
          req.config.response_format);
    }
    parse_output(body, req);
    parse_stream(body, req);
    out.request = std::move(req);
  } catch (const ApiError& e) {
    out.error = e;
  }
  return out;
}

std::string system_fingerprint(const detinfer::DeterministicSession& session) {
  detinfer::Hasher h;
  h.update_field(session.model_fingerprint());
  h.update_field(detinfer::to_string(session.mode()));
  // 16-bit KV storage gives other bits: keyed in, absent for f32 (fingerprints unchanged).
  const detinfer::KvDType kv = session.options().kv_dtype;
  if (kv != detinfer::KvDType::kF32) h.update_field(detinfer::to_string(kv));
  h.update_u32(static_cast<std::uint32_t>(detinfer::kNumericsSpecVersion));
  h.update_field(DETINFER_VERSION_STRING);
  return "fp_" + detinfer::hex64(h.digest64());
}

json completion_response(const ResponseContext& ctx, const CompletionRequest& req,
                         const detinfer::GenerationResult& result,
                         const detinfer::DeterministicSession& session, bool full_fingerprint) {
  json choices = json::array();
  std::int64_t completion_tokens = 0;
  json digests = json::array();
  for (std::size_t i = 0; i < result.sequences.size(); ++i) {
    const detinfer::Sequence& s = result.sequences[i];
    completion_tokens += static_cast<std::int64_t>(s.tokens.size());
    const std::string prefix = req.echo ? req.prompt_text : std::string();
    json choice = {{"text", prefix + s.text},
                   {"index", i},
                   {"finish_reason", detinfer::to_string(s.finish_reason)}};
    std::size_t offset = code_points(prefix);
    choice["logprobs"] = req.logprobs_requested
                             ? logprobs_json(s.logprobs, req.logprobs, session.tokenizer(), offset)
                             : json(nullptr);
    choices.push_back(choice);
    digests.push_back(detinfer::hex64(s.digest));
  }
  const std::int64_t prompt_tokens = static_cast<std::int64_t>(result.prompt_tokens.size());
  json r = {{"id", ctx.id},
            {"object", "text_completion"},
            {"created", ctx.created},
            {"model", ctx.model},
            {"system_fingerprint", ctx.system_fingerprint},
            {"choices", choices},
            {"usage",
             {{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}}}};
  json ext = {{"seed", result.seed},
              {"digest", digests.empty() ? json(nullptr) : digests[0]},
              {"digests", digests},
              {"model_fingerprint", session.model_fingerprint()},
              {"numerics", detinfer::to_string(session.mode())},
              {"prefix_cached_tokens", result.cache.prefix_cached_tokens},
              {"result_cache_hit", result.cache.result_cache_hit}};
  if (full_fingerprint && !result.fingerprint_json.empty()) {
    ext["fingerprint"] = json::parse(result.fingerprint_json, nullptr, false);
  }
  // The receipt POST /v1/verify checks (docs/fingerprint.md).
  if (!result.transcript_json.empty()) ext["transcript"] = json::parse(result.transcript_json);
  r["detinfer"] = ext;
  return r;
}

}  // namespace detinfer_cli
