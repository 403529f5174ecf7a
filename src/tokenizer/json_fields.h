// Typed access to tokenizer.json fields with errors that name the field (kCorrupt) or the
// unsupported component (kUnsupported).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"

namespace detinfer::tokenizer {

using Json = nlohmann::json;

// `where` is a path such as "tokenizer.json: pre_tokenizer.pretokenizers[1]".
inline const Json& require(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object()) fail(ErrorCode::kCorrupt, where, ": expected an object");
  const auto it = j.find(key);
  if (it == j.end()) fail(ErrorCode::kCorrupt, where, ": missing field '", key, "'");
  return *it;
}

inline std::string get_string(const Json& j, const char* key, const std::string& where) {
  const Json& v = require(j, key, where);
  if (!v.is_string()) fail(ErrorCode::kCorrupt, where, ".", key, ": expected a string");
  return v.get<std::string>();
}

inline bool get_bool(const Json& j, const char* key, bool fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(ErrorCode::kCorrupt, where, ".", key, ": expected true or false");
  return it->get<bool>();
}

// A string field that may be absent or null.
inline std::string get_optional_string(const Json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) fail(ErrorCode::kCorrupt, where, ".", key, ": expected a string");
  return it->get<std::string>();
}

inline std::int64_t get_int(const Json& j, const char* key, const std::string& where) {
  const Json& v = require(j, key, where);
  if (!v.is_number_integer()) fail(ErrorCode::kCorrupt, where, ".", key, ": expected an integer");
  return v.get<std::int64_t>();
}

inline std::string component_type(const Json& j, const std::string& where) {
  return get_string(j, "type", where);
}

[[noreturn]] inline void unsupported(const std::string& where, std::string_view what) {
  fail(ErrorCode::kUnsupported, where, ": unsupported ", what,
       " (detinfer refuses rather than tokenize differently from Hugging Face)");
}

// Split/Replace patterns: {"Regex": "..."} or {"String": "..."}.
struct Pattern {
  std::string text;
  bool is_regex = false;
};
inline Pattern get_pattern(const Json& j, const std::string& where) {
  const Json& p = require(j, "pattern", where);
  if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
    return {p["Regex"].get<std::string>(), true};
  }
  if (p.is_object() && p.contains("String") && p["String"].is_string()) {
    return {p["String"].get<std::string>(), false};
  }
  fail(ErrorCode::kCorrupt, where, ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
}

// The steps of a "Sequence" component: j[key] is an array and make(entry, where) builds
// each entry (named where.key[i] in errors); entries that make nothing (null) are dropped.
template <typename Make>
auto sequence_steps(const Json& j, const char* key, const std::string& where, Make make)
    -> std::vector<decltype(make(j, where))> {
  const Json& list = require(j, key, where);
  if (!list.is_array()) fail(ErrorCode::kCorrupt, where, ".", key, ": expected an array");
  std::vector<decltype(make(j, where))> steps;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto step = make(list[i], where + "." + key + "[" + std::to_string(i) + "]");
    if (step) steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace detinfer::tokenizer
