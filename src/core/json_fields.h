// The one typed reader of a parsed JSON document (parse it with core::parse_json,
// core/json_parse.h): fingerprints, transcripts, model configs. Every access names the
// value's path ("fingerprint.request.seed", "config.json.hidden_size") in the Error, whose
// code the document chooses (kCorrupt for files, kInvalidArgument for requests); unknown
// fields are rejected unless the document allows them, so nothing is read by accident.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "detinfer/error.h"
#include "detinfer/hash.h"

namespace detinfer::core {

using nlohmann::json;

// How a document is read.
struct JsonReadPolicy {
  ErrorCode code = ErrorCode::kCorrupt;  // the code of every failure
  bool reject_unknown = true;            // done() fails on a field that was never read
  bool null_is_absent = false;           // a null field reads as an absent one (config.json)
  const char* format = "the document";   // named by done(): "<path> is not part of <format>"
};

// A JSON object being read at `path`. Call done() after reading every field.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string path, JsonReadPolicy policy = {});

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

  // Optional fields: `fallback` when absent, else checked like the required readers.
  std::string string_or(const char* key, const std::string& fallback);
  bool boolean_or(const char* key, bool fallback);
  std::int64_t integer_or(const char* key, std::int64_t min, std::int64_t max,
                          std::int64_t fallback);
  // A finite number in [min, max].
  double number_or(const char* key, double min, double max, double fallback);

  // Fails naming the first field that was never read (when the policy rejects unknowns).
  void done() const;

  std::string path_of(const char* key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }
  const JsonReadPolicy& policy() const { return policy_; }

 private:
  const json& j_;
  std::string path_;
  JsonReadPolicy policy_;
  std::set<std::string> read_;
};

// Element readers shared by arrays and objects; `path` names the value, `code` is the
// Error's code.
std::string as_string(const json& v, const std::string& path, ErrorCode code = ErrorCode::kCorrupt);
bool as_boolean(const json& v, const std::string& path, ErrorCode code = ErrorCode::kCorrupt);
std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min, std::int64_t max,
                        ErrorCode code = ErrorCode::kCorrupt);
// A finite number.
double as_number(const json& v, const std::string& path, ErrorCode code = ErrorCode::kCorrupt);
std::uint64_t as_hex64(const json& v, const std::string& path,
                       ErrorCode code = ErrorCode::kCorrupt);
const json& as_array(const json& v, const std::string& path, ErrorCode code = ErrorCode::kCorrupt);
// A uint64 written as a decimal string without leading zeros (seeds: JSON numbers lose
// precision above 2^53 in many readers).
std::uint64_t as_decimal_u64(const json& v, const std::string& path,
                             ErrorCode code = ErrorCode::kCorrupt);

}  // namespace detinfer::core
