// Strict, field-by-field reading of a parsed JSON document (parse it with
// core::parse_json): every access names the field's path in the Error, unknown fields are
// rejected, and nothing is read by accident. Every failure is Error(kCorrupt).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "detinfer/hash.h"

namespace detinfer::fingerprint {

using nlohmann::json;

// A JSON object being read. Call done() after reading every field.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string path);

  bool has(const char* key) const;
  const json& required(const char* key);
  // nullptr when absent.
  const json* optional(const char* key);

  std::string string(const char* key);
  bool boolean(const char* key);
  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max);
  double number(const char* key);
  std::uint64_t hex64(const char* key);
  Hash128 hex128(const char* key);
  ObjectReader object(const char* key);
  const json& array(const char* key);

  // Fails naming the first field that was never read.
  void done() const;

  std::string path_of(const char* key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
  std::set<std::string> read_;
};

// Element readers shared by arrays and objects; `path` names the value.
std::string as_string(const json& v, const std::string& path);
std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min, std::int64_t max);
double as_number(const json& v, const std::string& path);
std::uint64_t as_hex64(const json& v, const std::string& path);
const json& as_array(const json& v, const std::string& path);
// A uint64 written as a decimal string without leading zeros (seeds: JSON numbers lose
// precision above 2^53 in many readers).
std::uint64_t as_decimal_u64(const json& v, const std::string& path);

}  // namespace detinfer::fingerprint
