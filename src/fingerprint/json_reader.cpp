#include "fingerprint/json_reader.h"

#include <cmath>
#include <limits>
#include <set>

#include "core/check.h"

namespace detinfer::fingerprint {

namespace {
const char* type_name(const json& v) { return v.type_name(); }
}  // namespace

std::string as_string(const json& v, const std::string& path) {
  if (!v.is_string())
    fail(ErrorCode::kCorrupt, "fingerprint field ", path, ": expected a string, got ",
         type_name(v));
  return v.get<std::string>();
}

std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min,
                        std::int64_t max) {
  if (!v.is_number_integer()) {
    fail(ErrorCode::kCorrupt, "fingerprint field ", path, ": expected an integer, got ",
         type_name(v));
  }
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
  if (!in_range || x < min) {
    fail(ErrorCode::kCorrupt, "fingerprint field ", path, ": ", v.dump(), " is outside [", min,
         ", ", max, "]");
  }
  return x;
}

double as_number(const json& v, const std::string& path) {
  if (!v.is_number())
    fail(ErrorCode::kCorrupt, "fingerprint field ", path, ": expected a number, got ",
         type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(ErrorCode::kCorrupt, "fingerprint field ", path, ": not finite");
  return d;
}

std::uint64_t as_hex64(const json& v, const std::string& path) {
  const std::string s = as_string(v, path);
  std::uint64_t x = 0;
  bool ok = s.size() == 16;
  for (char c : s) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) ok = false;
    x = (x << 4) | static_cast<std::uint64_t>(d < 0 ? 0 : d);
  }
  if (!ok)
    fail(ErrorCode::kCorrupt, "fingerprint field ", path,
         ": expected 16 lowercase hex digits, got '", s, "'");
  return x;
}

const json& as_array(const json& v, const std::string& path) {
  if (!v.is_array())
    fail(ErrorCode::kCorrupt, "fingerprint field ", path, ": expected an array, got ",
         type_name(v));
  return v;
}

ObjectReader::ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) {
    fail(ErrorCode::kCorrupt, "fingerprint field ", path_, ": expected an object, got ",
         type_name(j_));
  }
}

bool ObjectReader::has(const char* key) const { return j_.contains(key); }

const json& ObjectReader::required(const char* key) {
  const auto it = j_.find(key);
  if (it == j_.end()) fail(ErrorCode::kCorrupt, "fingerprint field ", path_of(key), " is missing");
  read_.insert(key);
  return *it;
}

const json* ObjectReader::optional(const char* key) {
  const auto it = j_.find(key);
  if (it == j_.end()) return nullptr;
  read_.insert(key);
  return &*it;
}

std::string ObjectReader::string(const char* key) { return as_string(required(key), path_of(key)); }

bool ObjectReader::boolean(const char* key) {
  const json& v = required(key);
  if (!v.is_boolean())
    fail(ErrorCode::kCorrupt, "fingerprint field ", path_of(key), ": expected a boolean, got ",
         type_name(v));
  return v.get<bool>();
}

std::int64_t ObjectReader::integer(const char* key, std::int64_t min, std::int64_t max) {
  return as_integer(required(key), path_of(key), min, max);
}

double ObjectReader::number(const char* key) { return as_number(required(key), path_of(key)); }

std::uint64_t ObjectReader::hex64(const char* key) { return as_hex64(required(key), path_of(key)); }

Hash128 ObjectReader::hex128(const char* key) {
  const std::string s = string(key);
  bool ok = s.size() == 32;
  for (char c : s) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!ok)
    fail(ErrorCode::kCorrupt, "fingerprint field ", path_of(key),
         ": expected 32 lowercase hex digits, got '", s, "'");
  return Hash128::from_hex(s);
}

ObjectReader ObjectReader::object(const char* key) {
  return ObjectReader(required(key), path_of(key));
}

const json& ObjectReader::array(const char* key) { return as_array(required(key), path_of(key)); }

void ObjectReader::done() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (read_.count(it.key()) == 0) {
      fail(ErrorCode::kCorrupt, "fingerprint field ", path_of(it.key().c_str()), " is not part of ",
           "detinfer.fingerprint/1");
    }
  }
}

std::uint64_t as_decimal_u64(const json& v, const std::string& path) {
  const std::string s = as_string(v, path);
  std::uint64_t x = 0;
  bool ok = !s.empty() && s.size() <= 20 && (s == "0" || s[0] != '0');
  for (char c : s) {
    if (c < '0' || c > '9') ok = false;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (ok && x > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) ok = false;
    if (ok) x = x * 10 + digit;
  }
  if (!ok) {
    fail(ErrorCode::kCorrupt, "fingerprint field ", path,
         ": expected a decimal uint64 without leading zeros, got '", s, "'");
  }
  return x;
}

}  // namespace detinfer::fingerprint
