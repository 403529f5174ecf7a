#include "core/json_fields.h"

#include <cmath>
#include <limits>
#include <set>

#include "core/check.h"

namespace detinfer::core {

namespace {
const char* type_name(const json& v) { return v.type_name(); }

bool lower_hex(const std::string& s, std::size_t digits) {
  bool ok = s.size() == digits;
  for (char c : s) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  return ok;
}
}  // namespace

std::string as_string(const json& v, const std::string& path, ErrorCode code) {
  if (!v.is_string()) fail(code, path, ": expected a string, got ", type_name(v));
  return v.get<std::string>();
}

bool as_boolean(const json& v, const std::string& path, ErrorCode code) {
  if (!v.is_boolean()) fail(code, path, ": expected a boolean, got ", type_name(v));
  return v.get<bool>();
}

std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min, std::int64_t max,
                        ErrorCode code) {
  if (!v.is_number_integer()) fail(code, path, ": expected an integer, got ", type_name(v));
  bool in_range;
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    in_range = u <= static_cast<std::uint64_t>(max);
    x = static_cast<std::int64_t>(u);
  } else {
    x = v.get<std::int64_t>();
    in_range = x >= min && x <= max;
  }
  if (!in_range || x < min) fail(code, path, ": ", v.dump(), " is outside [", min, ", ", max, "]");
  return x;
}

double as_number(const json& v, const std::string& path, ErrorCode code) {
  if (!v.is_number()) fail(code, path, ": expected a number, got ", type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(code, path, ": not finite");
  return d;
}

std::uint64_t as_hex64(const json& v, const std::string& path, ErrorCode code) {
  const std::string s = as_string(v, path, code);
  if (!lower_hex(s, 16)) fail(code, path, ": expected 16 lowercase hex digits, got '", s, "'");
  std::uint64_t x = 0;
  for (char c : s) x = (x << 4) | static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  return x;
}

const json& as_array(const json& v, const std::string& path, ErrorCode code) {
  if (!v.is_array()) fail(code, path, ": expected an array, got ", type_name(v));
  return v;
}

std::uint64_t as_decimal_u64(const json& v, const std::string& path, ErrorCode code) {
  const std::string s = as_string(v, path, code);
  std::uint64_t x = 0;
  bool ok = !s.empty() && s.size() <= 20 && (s == "0" || s[0] != '0');
  for (char c : s) {
    if (c < '0' || c > '9') ok = false;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (ok && x > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) ok = false;
    if (ok) x = x * 10 + digit;
  }
  if (!ok) fail(code, path, ": expected a decimal uint64 without leading zeros, got '", s, "'");
  return x;
}

ObjectReader::ObjectReader(const json& j, std::string path, JsonReadPolicy policy)
    : j_(j), path_(std::move(path)), policy_(policy) {
  if (!j_.is_object()) fail(policy_.code, path_, ": expected an object, got ", type_name(j_));
}

bool ObjectReader::has(const char* key) const {
  const auto it = j_.find(key);
  return it != j_.end() && !(policy_.null_is_absent && it->is_null());
}

const json& ObjectReader::required(const char* key) {
  if (!has(key)) fail(policy_.code, path_of(key), " is missing");
  read_.insert(key);
  return *j_.find(key);
}

const json* ObjectReader::optional(const char* key) {
  const auto it = j_.find(key);
  if (it == j_.end()) return nullptr;
  read_.insert(key);
  return has(key) ? &*it : nullptr;
}

std::string ObjectReader::string(const char* key) {
  return as_string(required(key), path_of(key), policy_.code);
}

bool ObjectReader::boolean(const char* key) {
  return as_boolean(required(key), path_of(key), policy_.code);
}

std::int64_t ObjectReader::integer(const char* key, std::int64_t min, std::int64_t max) {
  return as_integer(required(key), path_of(key), min, max, policy_.code);
}

double ObjectReader::number(const char* key) {
  return as_number(required(key), path_of(key), policy_.code);
}

std::uint64_t ObjectReader::hex64(const char* key) {
  return as_hex64(required(key), path_of(key), policy_.code);
}

Hash128 ObjectReader::hex128(const char* key) {
  const std::string s = string(key);
  if (!lower_hex(s, 32))
    fail(policy_.code, path_of(key), ": expected 32 lowercase hex digits, got '", s, "'");
  return Hash128::from_hex(s);
}

ObjectReader ObjectReader::object(const char* key) {
  return ObjectReader(required(key), path_of(key), policy_);
}

const json& ObjectReader::array(const char* key) {
  return as_array(required(key), path_of(key), policy_.code);
}

std::string ObjectReader::string_or(const char* key, const std::string& fallback) {
  const json* v = optional(key);
  return v == nullptr ? fallback : as_string(*v, path_of(key), policy_.code);
}

bool ObjectReader::boolean_or(const char* key, bool fallback) {
  const json* v = optional(key);
  return v == nullptr ? fallback : as_boolean(*v, path_of(key), policy_.code);
}

std::int64_t ObjectReader::integer_or(const char* key, std::int64_t min, std::int64_t max,
                                      std::int64_t fallback) {
  const json* v = optional(key);
  return v == nullptr ? fallback : as_integer(*v, path_of(key), min, max, policy_.code);
}

double ObjectReader::number_or(const char* key, double min, double max, double fallback) {
  const json* v = optional(key);
  if (v == nullptr) return fallback;
  const double d = as_number(*v, path_of(key), policy_.code);
  if (!(d >= min && d <= max))
    fail(policy_.code, path_of(key), ": ", d, " is outside [", min, ", ", max, "]");
  return d;
}

void ObjectReader::done() const {
  if (!policy_.reject_unknown) return;
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (read_.count(it.key()) == 0)
      fail(policy_.code, path_of(it.key().c_str()), " is not part of ", policy_.format);
  }
}

}  // namespace detinfer::core
