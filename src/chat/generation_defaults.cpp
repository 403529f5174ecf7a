#include "chat/generation_defaults.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/json_parse.h"

namespace detinfer::chat {

namespace {

using Json = nlohmann::json;
constexpr core::JsonLimits kLimits{/*max_depth=*/32, /*max_bytes=*/std::size_t{16} << 20, true};

struct Reader {
  const Json& j;
  const std::string& where;

  const Json* find(const char* key) const {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<double> number(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(ErrorCode::kCorrupt, where, ": ", key, ": expected a number");
    return v->get<double>();
  }
  std::optional<std::int64_t> integer(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer())
      fail(ErrorCode::kCorrupt, where, ": ", key, ": expected an integer");
    return v->get<std::int64_t>();
  }
  std::optional<bool> boolean(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) fail(ErrorCode::kCorrupt, where, ": ", key, ": expected true or false");
    return v->get<bool>();
  }
};

std::int32_t to_i32(std::int64_t v, const std::string& where, const char* key) {
  if (v < 0 || v > std::numeric_limits<std::int32_t>::max()) {
    fail(ErrorCode::kCorrupt, where, ": ", key, ": ", v, " is out of range");
  }
  return static_cast<std::int32_t>(v);
}

}  // namespace

GenerationDefaults parse_generation_defaults(const std::string& json_text, const std::string& where,
                                             std::int64_t context_length) {
  const Json j = core::parse_json(json_text, kLimits, ErrorCode::kCorrupt, where);
  if (!j.is_object()) fail(ErrorCode::kCorrupt, where, ": not a JSON object");
  const Reader r{j, where};
  GenerationDefaults d;
  GenerationConfig& c = d.config;
  const std::optional<bool> do_sample = r.boolean("do_sample");
  if (do_sample.has_value() && !*do_sample) {
    c.temperature = 0.0f;
    d.fields.push_back("temperature");
  } else if (const auto t = r.number("temperature")) {
    c.temperature = static_cast<float>(*t);
    d.fields.push_back("temperature");
  } else if (do_sample.has_value()) {
    c.temperature = 1.0f;
    d.fields.push_back("temperature");
  }
  if (const auto v = r.number("top_p")) {
    c.top_p = static_cast<float>(*v);
    d.fields.push_back("top_p");
  }
  if (const auto v = r.integer("top_k")) {
    c.top_k = to_i32(*v, where, "top_k");
    d.fields.push_back("top_k");
  }
  if (const auto v = r.number("min_p")) {
    c.min_p = static_cast<float>(*v);
    d.fields.push_back("min_p");
  }
  if (const auto v = r.number("repetition_penalty")) {
    c.repetition_penalty = static_cast<float>(*v);
    d.fields.push_back("repetition_penalty");
  }
  std::optional<std::int64_t> max_new = r.integer("max_new_tokens");
  if (!max_new) max_new = r.integer("max_length");
  if (max_new) {
    std::int64_t v = *max_new;
    if (context_length > 1) v = std::min(v, context_length - 1);
    c.max_new_tokens = to_i32(v, where, "max_new_tokens");
    d.fields.push_back("max_new_tokens");
  }
  return d;
}

GenerationDefaults load_generation_defaults(const std::string& model_dir,
                                            std::int64_t context_length) {
  const std::filesystem::path p = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return {};
  return parse_generation_defaults(
      core::read_file_bounded(p.string(), kLimits.max_bytes, "generation_config.json"), p.string(),
      context_length);
}

}  // namespace detinfer::chat
