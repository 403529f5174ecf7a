// Transcript <-> JSON (formats detinfer.transcript/1 and /2, docs/fingerprint.md) and the
// transcript of a run fingerprint.
#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/json_fields.h"
#include "core/json_parse.h"
#include "core/vocabulary.h"
#include "detinfer/fingerprint.h"
#include "detinfer/transcript.h"
#include "fingerprint/fingerprint_config_json.h"

namespace detinfer {

using core::as_array;
using core::as_hex64;
using core::as_integer;
using core::json;
using core::ObjectReader;

namespace {
// A transcript is a caller's input: kInvalidArgument, no unknown fields.
constexpr core::JsonReadPolicy kTranscriptPolicy{ErrorCode::kInvalidArgument, true, false,
                                                 kTranscriptFormat};
constexpr ErrorCode kCode = kTranscriptPolicy.code;

// A valid transcript nests 4 levels (top, samples, sample, list); 16 bounds every walk.
constexpr std::int32_t kMaxTranscriptDepth = 16;
constexpr std::size_t kMaxTranscriptBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxListLength = std::size_t{1} << 20;
constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();

const json& bounded_array(const json& v, const std::string& path) {
  const json& a = as_array(v, path, kCode);
  if (a.size() > kMaxListLength) {
    fail(kCode, path, " has ", a.size(), " entries; at most ", kMaxListLength, " are accepted");
  }
  return a;
}

std::vector<std::int32_t> ids(const json& v, const std::string& path) {
  const json& a = bounded_array(v, path);
  std::vector<std::int32_t> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    out.push_back(static_cast<std::int32_t>(
        as_integer(a[i], path + "[" + std::to_string(i) + "]", 0, kI32Max, kCode)));
  }
  return out;
}

std::vector<std::uint64_t> digests(const json& v, const std::string& path) {
  const json& a = bounded_array(v, path);
  std::vector<std::uint64_t> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    out.push_back(as_hex64(a[i], path + "[" + std::to_string(i) + "]", kCode));
  }
  return out;
}

TranscriptSample read_sample(ObjectReader r) {
  TranscriptSample s;
  s.tokens = ids(r.required("tokens"), r.path_of("tokens"));
  s.step_digests = digests(r.required("step_digests"), r.path_of("step_digests"));
  if (s.step_digests.size() != s.tokens.size()) {
    fail(kCode, r.path_of("step_digests"), " has ", s.step_digests.size(), " digests for ",
         s.tokens.size(), " tokens (one per token)");
  }
  s.chain_digest = r.hex64("chain_digest");
  const std::string reason = r.string("finish_reason");
  const auto parsed = core::parse_finish_reason(reason);
  if (!parsed) {
    fail(kCode, r.path_of("finish_reason"), ": '", reason,
         "' is not one of length, stop, cancelled");
  }
  s.finish_reason = *parsed;
  r.done();
  return s;
}

// True for /2 (a chat transcript), false for /1.
bool check_format(ObjectReader& top) {
  const std::string format = top.string("format");
  if (format == kTranscriptFormat) return false;
  if (format == kChatTranscriptFormat) return true;
  if (format.rfind("detinfer.transcript/", 0) == 0) {
    fail(ErrorCode::kUnsupported, "transcript format '", format,
         "' is not supported by this build of detinfer (it reads ", kTranscriptFormat, " and ",
         kChatTranscriptFormat, ")");
  }
  fail(ErrorCode::kInvalidArgument, "transcript.format: '", format,
       "' is not a detinfer transcript format (expected ", kTranscriptFormat, " or ",
       kChatTranscriptFormat, ")");
}

// The JSON text fields are kept as text: verify parses them with the chat rules.
TranscriptChat read_chat(ObjectReader r) {
  TranscriptChat c;
  c.messages_json = r.string("messages");
  c.add_generation_prompt = r.boolean("add_generation_prompt");
  c.tools_json = r.string_or("tools", "");
  c.extra_variables_json = r.string_or("extra_variables", "");
  c.template_name = r.string_or("template_name", "");
  c.now_unix_seconds = r.integer("now", std::numeric_limits<std::int64_t>::min(),
                                 std::numeric_limits<std::int64_t>::max());
  c.prompt_suffix = r.string_or("prompt_suffix", "");
  r.done();
  return c;
}

json chat_json(const TranscriptChat& c) {
  json j = {{"messages", c.messages_json}, {"add_generation_prompt", c.add_generation_prompt}};
  if (!c.tools_json.empty()) j["tools"] = c.tools_json;
  if (!c.extra_variables_json.empty()) j["extra_variables"] = c.extra_variables_json;
  if (!c.template_name.empty()) j["template_name"] = c.template_name;
  j["now"] = c.now_unix_seconds;
  if (!c.prompt_suffix.empty()) j["prompt_suffix"] = c.prompt_suffix;
  return j;
}

Transcript read_transcript(const json& j) {
  Transcript t;
  ObjectReader top(j, "transcript", kTranscriptPolicy);
  const bool is_chat = check_format(top);
  ObjectReader model = top.object("model");
  t.model_fingerprint = model.hex128("fingerprint");
  t.weight_dtype = model.string("weight_dtype");
  model.done();
  ObjectReader numerics = top.object("numerics");
  t.numerics_mode = numerics.string("mode");
  t.numerics_spec = static_cast<std::int32_t>(numerics.integer("spec_version", 0, kI32Max));
  t.kv_dtype = numerics.string("kv_dtype");
  t.weight_format = numerics.string_or("weight_format", "");
  numerics.done();
  t.tokenizer_hash = top.hex128("tokenizer_hash");
  if (is_chat) {
    t.chat = read_chat(top.object("chat"));
    if (const json* p = top.optional("prompt_tokens")) {
      t.prompt_tokens = ids(*p, top.path_of("prompt_tokens"));
    }
  } else {
    t.prompt_tokens = ids(top.required("prompt_tokens"), top.path_of("prompt_tokens"));
  }
  t.config = fingerprint::config_from_json(top.required("config"), top.path_of("config"),
                                           kTranscriptPolicy);
  t.seed = core::as_decimal_u64(top.required("seed"), top.path_of("seed"), kCode);
  const json& samples = bounded_array(top.required("samples"), top.path_of("samples"));
  // n samples (or n best beams); a request cancelled before its first token has one.
  const auto most = std::max(t.config.num_return_sequences, t.config.num_beams);
  if (samples.empty() || static_cast<std::int64_t>(samples.size()) > most) {
    fail(ErrorCode::kInvalidArgument, "transcript.samples has ", samples.size(),
         " samples; config.num_return_sequences allows 1 to ", most);
  }
  for (std::size_t i = 0; i < samples.size(); ++i) {
    t.samples.push_back(read_sample(ObjectReader(
        samples[i], top.path_of("samples") + "[" + std::to_string(i) + "]", kTranscriptPolicy)));
  }
  top.done();
  return t;
}
}  // namespace

std::string Transcript::to_json(int indent) const {
  json j;
  j["format"] = chat ? kChatTranscriptFormat : kTranscriptFormat;
  j["model"] = {{"fingerprint", model_fingerprint.hex()}, {"weight_dtype", weight_dtype}};
  j["numerics"] = {
      {"mode", numerics_mode}, {"spec_version", numerics_spec}, {"kv_dtype", kv_dtype}};
  if (!weight_format.empty()) j["numerics"]["weight_format"] = weight_format;
  j["tokenizer_hash"] = tokenizer_hash.hex();
  if (chat) j["chat"] = chat_json(*chat);
  if (!chat || !prompt_tokens.empty()) j["prompt_tokens"] = prompt_tokens;
  j["config"] = fingerprint::config_to_json(config);
  j["seed"] = std::to_string(seed);
  json samples_json = json::array();
  for (const TranscriptSample& s : samples) {
    json steps = json::array();
    for (std::uint64_t d : s.step_digests) steps.push_back(hex64(d));
    samples_json.push_back({{"tokens", s.tokens},
                            {"step_digests", std::move(steps)},
                            {"chain_digest", hex64(s.chain_digest)},
                            {"finish_reason", to_string(s.finish_reason)}});
  }
  j["samples"] = std::move(samples_json);
  return j.dump(indent);
}

Transcript Transcript::from_json(std::string_view text) {
  core::JsonLimits limits;
  limits.max_depth = kMaxTranscriptDepth;
  limits.max_bytes = kMaxTranscriptBytes;
  const json j = core::parse_json(text, limits, ErrorCode::kInvalidArgument, "transcript");
  return read_transcript(j);
}

Transcript transcript_of(const RunFingerprint& fp) {
  if (!fp.request.prompt_tokens) {
    fail(ErrorCode::kInvalidArgument,
         "a transcript needs the prompt ids, and this fingerprint records only their hash");
  }
  Transcript t;
  t.model_fingerprint = fp.model.fingerprint;
  t.weight_dtype = fp.model.weight_dtype;
  t.numerics_mode = fp.numerics.mode;
  t.numerics_spec = fp.numerics.spec_version;
  t.kv_dtype = fp.numerics.kv_dtype;
  t.weight_format = fp.numerics.weight_format;
  t.tokenizer_hash = fp.tokenizer_hash;
  t.prompt_tokens = *fp.request.prompt_tokens;
  t.config = fp.request.config;
  t.config.seed.reset();
  t.seed = fp.request.seed;
  for (const FingerprintSequence& s : fp.sequences) {
    t.samples.push_back({s.tokens, s.step_digests, s.chain_digest, s.finish_reason});
  }
  return t;
}

}  // namespace detinfer
