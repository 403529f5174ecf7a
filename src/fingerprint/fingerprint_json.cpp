// RunFingerprint <-> JSON (schema detinfer.fingerprint/1, docs/fingerprint.schema.json).
#include <cstring>
#include <limits>
#include <sstream>

#include "core/check.h"
#include "core/json_fields.h"
#include "core/json_parse.h"
#include "core/vocabulary.h"
#include "detinfer/fingerprint.h"
#include "detinfer/numerics.h"
#include "fingerprint/base64.h"
#include "fingerprint/fingerprint_config_json.h"

namespace detinfer {

using core::as_array;
using core::as_hex64;
using core::as_integer;
using core::as_string;
using core::json;
using core::ObjectReader;

namespace {
// The deepest valid fingerprint is a few levels; 32 leaves room and bounds every walk.
constexpr std::int32_t kMaxFingerprintDepth = 32;
constexpr std::size_t kMaxFingerprintBytes = std::size_t{256} << 20;    // one document
constexpr std::size_t kMaxFingerprintFileBytes = std::size_t{1} << 30;  // a JSON Lines file
constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

json hex_list(const std::vector<std::uint64_t>& v) {
  json a = json::array();
  for (std::uint64_t d : v) a.push_back(hex64(d));
  return a;
}

std::string encode_logits(const std::vector<float>& row) {
  std::vector<std::uint8_t> bytes(row.size() * 4);
  for (std::size_t i = 0; i < row.size(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, &row[i], 4);
    for (int k = 0; k < 4; ++k) bytes[4 * i + k] = static_cast<std::uint8_t>(b >> (8 * k));
  }
  return fingerprint::base64_encode(bytes.data(), bytes.size());
}

std::vector<float> decode_logits(const json& v, const std::string& path) {
  const auto bytes = fingerprint::base64_decode(as_string(v, path));
  if (!bytes || bytes->empty() || bytes->size() % 4 != 0) {
    fail(ErrorCode::kCorrupt, path, ": expected base64 of a non-empty little-endian fp32 array");
  }
  std::vector<float> row(bytes->size() / 4);
  for (std::size_t i = 0; i < row.size(); ++i) {
    std::uint32_t b = 0;
    for (int k = 0; k < 4; ++k) b |= static_cast<std::uint32_t>((*bytes)[4 * i + k]) << (8 * k);
    std::memcpy(&row[i], &b, 4);
  }
  return row;
}

std::vector<std::int32_t> token_list(const json& v, const std::string& path) {
  std::vector<std::int32_t> out;
  const json& a = as_array(v, path);
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    out.push_back(static_cast<std::int32_t>(
        as_integer(a[i], path + "[" + std::to_string(i) + "]", 0, kI32Max)));
  }
  return out;
}

json to_json_object(const RunFingerprint& fp) {
  json j;
  j["schema"] = kFingerprintSchema;
  const auto& l = fp.library;
  j["library"] = {{"version", l.version},
                  {"git_revision", l.git_revision},
                  {"compiler", l.compiler},
                  {"build_type", l.build_type},
                  {"build_flags", l.build_flags}};
  const auto& n = fp.numerics;
  j["numerics"] = {{"mode", n.mode},
                   {"spec_version", n.spec_version},
                   {"kernel_isa", n.kernel_isa},
                   {"threads", n.threads},
                   {"device", n.device}};
  // Absent for the default, so f32 fingerprints are the same bytes as before kv_dtype.
  if (n.kv_dtype != "f32") j["numerics"]["kv_dtype"] = n.kv_dtype;
  if (!n.weight_format.empty()) j["numerics"]["weight_format"] = n.weight_format;
  const auto& d = fp.device;
  j["device"] = {{"cpu_model", d.cpu_model},
                 {"cpu_flags", d.cpu_flags},
                 {"hardware_threads", d.hardware_threads}};
  if (d.gpu) {
    j["device"]["gpu"] = {{"name", d.gpu->name},
                          {"compute_capability", d.gpu->compute_capability},
                          {"driver", d.gpu->driver}};
  }
  const auto& e = fp.environment;
  j["environment"] = {{"os", e.os},
                      {"glibc_version", e.glibc_version},
                      {"libtorch_version", e.libtorch_version},
                      {"env_vars", e.env_vars},
                      {"hash", hex64(e.hash())}};
  j["model"] = {{"fingerprint", fp.model.fingerprint.hex()},
                {"architecture", fp.model.architecture},
                {"weight_dtype", fp.model.weight_dtype}};
  j["tokenizer"] = {{"hash", fp.tokenizer_hash.hex()}};
  const auto& r = fp.request;
  json req = {{"prompt_hash", hex64(r.prompt_hash)},
              {"prompt_length", r.prompt_length},
              {"config", fingerprint::config_to_json(r.config)},
              {"seed", std::to_string(r.seed)}};
  if (r.prompt_tokens) req["prompt_tokens"] = *r.prompt_tokens;
  j["request"] = std::move(req);
  json seqs = json::array();
  for (const auto& s : fp.sequences) {
    json js = {{"tokens", s.tokens},
               {"finish_reason", to_string(s.finish_reason)},
               {"chain_digest", hex64(s.chain_digest)}};
    if (fp.level >= RecordLevel::kSteps) js["step_digests"] = hex_list(s.step_digests);
    if (fp.level >= RecordLevel::kLogits) {
      json rows = json::array();
      for (const auto& row : s.logits) rows.push_back(encode_logits(row));
      js["logits"] = std::move(rows);
    }
    seqs.push_back(std::move(js));
  }
  j["output"] = {{"level", to_string(fp.level)}, {"sequences", std::move(seqs)}};
  j["cache"] = {{"prefix_cached_tokens", fp.cache.prefix_cached_tokens},
                {"result_cache_hit", fp.cache.result_cache_hit}};
  return j;
}

void check_schema(ObjectReader& top) {
  const std::string schema = top.string("schema");
  if (schema == kFingerprintSchema) return;
  if (schema.rfind("detinfer.fingerprint/", 0) == 0) {
    fail(ErrorCode::kUnsupported, "fingerprint schema '", schema,
         "' is not supported by this build of detinfer (it reads ", kFingerprintSchema,
         " only); use the detinfer release that wrote it");
  }
  fail(ErrorCode::kCorrupt, "fingerprint.schema: '", schema,
       "' is not a detinfer fingerprint schema (expected ", kFingerprintSchema, ")");
}

void read_request(ObjectReader r, RunFingerprint& fp) {
  auto& req = fp.request;
  req.prompt_hash = r.hex64("prompt_hash");
  req.prompt_length = r.integer("prompt_length", 0, kI64Max);
  if (const json* p = r.optional("prompt_tokens")) {
    req.prompt_tokens = token_list(*p, r.path_of("prompt_tokens"));
    if (static_cast<std::int64_t>(req.prompt_tokens->size()) != req.prompt_length ||
        prompt_hash(*req.prompt_tokens) != req.prompt_hash) {
      fail(ErrorCode::kCorrupt, r.path_of("prompt_tokens"),
           ": the ids do not match prompt_length/prompt_hash");
    }
  }
  req.config = fingerprint::config_from_json(r.required("config"), r.path_of("config"));
  req.seed = core::as_decimal_u64(r.required("seed"), r.path_of("seed"));
  r.done();
}

RecordLevel parse_level(const std::string& s, const std::string& path) {
  for (RecordLevel l : {RecordLevel::kFinal, RecordLevel::kSteps, RecordLevel::kLogits}) {
    if (s == to_string(l)) return l;
  }
  fail(ErrorCode::kCorrupt, path, ": '", s, "' is not one of final, steps, logits");
}

FingerprintSequence read_sequence(ObjectReader r, RecordLevel level) {
  FingerprintSequence s;
  s.tokens = token_list(r.required("tokens"), r.path_of("tokens"));
  const std::string reason = r.string("finish_reason");
  const auto parsed = core::parse_finish_reason(reason);
  if (!parsed) {
    fail(ErrorCode::kCorrupt, r.path_of("finish_reason"), ": '", reason,
         "' is not one of length, stop, cancelled");
  }
  s.finish_reason = *parsed;
  s.chain_digest = r.hex64("chain_digest");
  if (level >= RecordLevel::kSteps) {
    const std::string path = r.path_of("step_digests");
    const json& a = r.array("step_digests");
    for (std::size_t i = 0; i < a.size(); ++i) {
      s.step_digests.push_back(as_hex64(a[i], path + "[" + std::to_string(i) + "]"));
    }
    if (s.step_digests.size() != s.tokens.size()) {
      fail(ErrorCode::kCorrupt, path, ": ", s.step_digests.size(), " digests for ", s.tokens.size(),
           " tokens");
    }
    if (chain_digest(s.step_digests) != s.chain_digest) {
      fail(ErrorCode::kCorrupt, r.path_of("chain_digest"),
           ": does not match the chain over step_digests");
    }
  }
  if (level >= RecordLevel::kLogits) {
    const std::string path = r.path_of("logits");
    const json& a = r.array("logits");
    for (std::size_t i = 0; i < a.size(); ++i) {
      s.logits.push_back(decode_logits(a[i], path + "[" + std::to_string(i) + "]"));
      if (s.logits.back().size() != s.logits.front().size()) {
        fail(ErrorCode::kCorrupt, path, "[", i, "]: rows differ in vocab size");
      }
      if (i < s.step_digests.size() &&
          logits_digest(s.logits[i].data(), s.logits[i].size()) != s.step_digests[i]) {
        fail(ErrorCode::kCorrupt, path, "[", i, "]: the row does not match step_digests[", i, "]");
      }
    }
    if (s.logits.size() != s.tokens.size()) {
      fail(ErrorCode::kCorrupt, path, ": ", s.logits.size(), " logits rows for ", s.tokens.size(),
           " tokens");
    }
  }
  r.done();
  return s;
}

void read_numerics(ObjectReader n, FingerprintNumerics& out) {
  out.mode = n.string("mode");
  try {
    parse_numerics_mode(out.mode);  // the one list of mode names
  } catch (const Error&) {
    fail(ErrorCode::kCorrupt, "fingerprint.numerics.mode: '", out.mode,
         "' is not one of canonical, fast, device_invariant");
  }
  out.spec_version = static_cast<int>(n.integer("spec_version", 0, kI32Max));
  out.kernel_isa = n.string("kernel_isa");
  out.threads = static_cast<int>(n.integer("threads", 1, 1 << 20));
  out.device = n.string("device");
  if (out.device != "cpu" && out.device != "cuda") {
    fail(ErrorCode::kCorrupt, "fingerprint.numerics.device: '", out.device,
         "' is not one of cpu, cuda");
  }
  if (n.has("kv_dtype")) {  // absent = f32
    out.kv_dtype = n.string("kv_dtype");
    if (out.kv_dtype != "f32" && out.kv_dtype != "bf16" && out.kv_dtype != "f16") {
      fail(ErrorCode::kCorrupt, "fingerprint.numerics.kv_dtype: '", out.kv_dtype,
           "' is not one of f32, bf16, f16");
    }
  }
  if (n.has("weight_format")) out.weight_format = n.string("weight_format");  // absent = stored
  n.done();
}

void read_device(ObjectReader d, FingerprintDevice& out) {
  out.cpu_model = d.string("cpu_model");
  const json& flags = d.array("cpu_flags");
  for (std::size_t i = 0; i < flags.size(); ++i) {
    out.cpu_flags.push_back(
        as_string(flags[i], "fingerprint.device.cpu_flags[" + std::to_string(i) + "]"));
  }
  out.hardware_threads = static_cast<std::uint32_t>(
      d.integer("hardware_threads", 0, std::numeric_limits<std::uint32_t>::max()));
  if (d.has("gpu")) {
    ObjectReader g = d.object("gpu");
    out.gpu = FingerprintGpu{g.string("name"), g.string("compute_capability"), g.string("driver")};
    g.done();
  }
  d.done();
}

void read_environment(ObjectReader e, FingerprintEnvironment& out) {
  out.os = e.string("os");
  out.glibc_version = e.string("glibc_version");
  out.libtorch_version = e.string("libtorch_version");
  ObjectReader vars = e.object("env_vars");
  const json& vj = e.required("env_vars");
  for (auto it = vj.begin(); it != vj.end(); ++it) {
    out.env_vars[it.key()] = vars.string(it.key().c_str());
  }
  vars.done();
  if (e.hex64("hash") != out.hash()) {
    fail(ErrorCode::kCorrupt, "fingerprint.environment.hash: does not match the ",
         "environment fields");
  }
  e.done();
}

void read_output(ObjectReader o, RunFingerprint& fp) {
  fp.level = parse_level(o.string("level"), o.path_of("level"));
  const json& seqs = o.array("sequences");
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    fp.sequences.push_back(read_sequence(
        ObjectReader(seqs[i], "fingerprint.output.sequences[" + std::to_string(i) + "]",
                     fingerprint::kFingerprintPolicy),
        fp.level));
  }
  o.done();
}

RunFingerprint from_json_object(const json& j) {
  ObjectReader top(j, "fingerprint", fingerprint::kFingerprintPolicy);
  check_schema(top);
  RunFingerprint fp;
  {
    ObjectReader l = top.object("library");
    fp.library = {l.string("version"), l.string("git_revision"), l.string("compiler"),
                  l.string("build_type"), l.string("build_flags")};
    l.done();
  }
  read_numerics(top.object("numerics"), fp.numerics);
  read_device(top.object("device"), fp.device);
  read_environment(top.object("environment"), fp.environment);
  {
    ObjectReader m = top.object("model");
    fp.model = {m.hex128("fingerprint"), m.string("architecture"), m.string("weight_dtype")};
    m.done();
  }
  {
    ObjectReader t = top.object("tokenizer");
    fp.tokenizer_hash = t.hex128("hash");
    t.done();
  }
  read_request(top.object("request"), fp);
  read_output(top.object("output"), fp);
  {
    ObjectReader c = top.object("cache");
    fp.cache.prefix_cached_tokens = c.integer("prefix_cached_tokens", 0, kI64Max);
    fp.cache.result_cache_hit = c.boolean("result_cache_hit");
    c.done();
  }
  top.done();
  return fp;
}
}  // namespace

std::string RunFingerprint::to_json(int indent) const {
  // Strings we did not produce (cpu model, env values) may hold invalid UTF-8; replace
  // such bytes rather than throwing.
  return to_json_object(*this).dump(indent < 0 ? -1 : indent, ' ', false,
                                    json::error_handler_t::replace);
}

RunFingerprint RunFingerprint::from_json(std::string_view text) {
  core::JsonLimits limits;
  limits.max_depth = kMaxFingerprintDepth;
  limits.max_bytes = kMaxFingerprintBytes;
  return from_json_object(core::parse_json(text, limits, ErrorCode::kCorrupt, "fingerprint"));
}

std::uint64_t RunFingerprint::request_key() const {
  Hasher h;
  h.update_field("detinfer.request_key/1");
  h.update_hash(model.fingerprint).update_hash(tokenizer_hash);
  h.update_u64(request.prompt_hash).update_i64(request.prompt_length);
  h.update_field(fingerprint::config_to_json(request.config).dump());
  h.update_u64(request.seed);
  return h.digest64();
}

std::vector<RunFingerprint> load_fingerprints(const std::string& path) {
  const std::string text =
      core::read_file_bounded(path, kMaxFingerprintFileBytes, "fingerprint file");
  std::vector<RunFingerprint> out;
  // One document (possibly pretty-printed) unless a line after the first starts a new
  // object: then JSON Lines, as the recorder writes.
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text.find("\n{", first) == std::string::npos) {
    try {
      out.push_back(RunFingerprint::from_json(text));
      return out;
    } catch (const Error& e) {
      fail(e.code(), path, ": ", e.message());
    }
  }
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(RunFingerprint::from_json(line));
    } catch (const Error& e) {
      fail(e.code(), path, ":", number, ": ", e.message());
    }
  }
  if (out.empty()) fail(ErrorCode::kCorrupt, path, ": no fingerprint in the file");
  return out;
}

}  // namespace detinfer
