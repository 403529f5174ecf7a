// GgufFile's look-ups and typed metadata getters (model/gguf.h).
#include <cmath>
#include <limits>

#include "core/check.h"
#include "model/gguf.h"

namespace detinfer::model {
namespace {

[[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, const char* wanted) {
  throw Error(ErrorCode::kCorrupt,
              str_cat("GGUF metadata '", key, "' is a ", to_string(v.type), ", not ", wanted), key);
}

[[noreturn]] void missing(const std::string& key) {
  throw Error(ErrorCode::kNotFound, str_cat("GGUF metadata '", key, "' is missing"), key);
}

bool is_signed(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}

template <typename T>
T require(const std::optional<T>& v, const std::string& key) {
  if (!v) missing(key);
  return *v;
}

}  // namespace

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

std::size_t GgufValue::array_size() const {
  return strings.size() + uints.size() + ints.size() + floats.size() + arrays.size();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

std::optional<std::uint64_t> GgufFile::find_uint(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) wrong_type(key, *v, "an integer");
  if (is_signed(v->type)) {
    if (v->i < 0) wrong_type(key, *v, "a non-negative integer");
    return static_cast<std::uint64_t>(v->i);
  }
  return v->u;
}

std::optional<double> GgufFile::find_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_float()) return v->f;
  if (!v->is_integer()) wrong_type(key, *v, "a number");
  const double d = is_signed(v->type) ? static_cast<double>(v->i) : static_cast<double>(v->u);
  const bool exact = is_signed(v->type)
                         ? static_cast<std::int64_t>(d) == v->i && std::fabs(d) < 0x1p63
                         : d < 0x1p64 && static_cast<std::uint64_t>(d) == v->u;
  if (!exact) wrong_type(key, *v, "a number a double holds exactly");
  return d;
}

std::optional<bool> GgufFile::find_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kBool) wrong_type(key, *v, "a bool");
  return v->u != 0;
}

std::optional<std::string> GgufFile::find_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kString) wrong_type(key, *v, "a string");
  return v->s;
}

std::uint64_t GgufFile::get_uint(const std::string& key) const {
  return require(find_uint(key), key);
}

std::int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) missing(key);
  if (!v->is_integer()) wrong_type(key, *v, "an integer");
  if (is_signed(v->type)) return v->i;
  if (v->u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    wrong_type(key, *v, "an integer that fits in 64 signed bits");
  }
  return static_cast<std::int64_t>(v->u);
}

double GgufFile::get_float(const std::string& key) const { return require(find_float(key), key); }

bool GgufFile::get_bool(const std::string& key) const { return require(find_bool(key), key); }

const std::string& GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) missing(key);
  if (v->type != GgufType::kString) wrong_type(key, *v, "a string");
  return v->s;
}

const GgufValue& GgufFile::get_array(const std::string& key, GgufType element) const {
  const GgufValue* v = find(key);
  if (v == nullptr) missing(key);
  if (v->type != GgufType::kArray) wrong_type(key, *v, "an array");
  if (v->element != element) {
    throw Error(ErrorCode::kCorrupt,
                str_cat("GGUF metadata '", key, "' is an array of ", to_string(v->element),
                        ", not of ", to_string(element)),
                key);
  }
  return *v;
}

}  // namespace detinfer::model
