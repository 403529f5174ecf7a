#include "jinja/value.h"

#include <algorithm>
#include <cmath>

namespace detinfer::jinja {

namespace {
void check_depth(std::uint32_t depth) {
  if (depth > kMaxValueDepth) {
    throw Error(ErrorCode::kResourceExhausted,
                "chat template: lists and dicts nest deeper than " +
                    std::to_string(kMaxValueDepth) + " levels",
                "chat_template");
  }
}
}  // namespace

void check_printed_size(const std::string& text) {
  if (text.size() > kMaxPrintedBytes) {
    throw Error(ErrorCode::kResourceExhausted,
                "chat template: a printed list or dict exceeds " +
                    std::to_string(kMaxPrintedBytes) + " bytes",
                "chat_template");
  }
}

Value Value::array(Array items, bool tuple) {
  Value v;
  v.kind = Kind::kList;
  v.b = tuple;
  for (const Value& e : items) v.depth = std::max(v.depth, e.depth + 1);
  if (items.empty()) v.depth = 1;
  check_depth(v.depth);
  v.list = std::make_shared<const Array>(std::move(items));
  return v;
}

Value Value::dictionary(std::shared_ptr<Object> o) {
  Value v;
  v.kind = Kind::kDict;
  v.depth = 1;
  for (const auto& e : o->entries) v.depth = std::max(v.depth, e.second.depth + 1);
  check_depth(v.depth);
  v.dict = std::move(o);
  return v;
}

namespace {
// Python hashes 1, 1.0 and True alike; dict keys compare the same way.
bool key_equals(const Value& a, const Value& b) {
  if (a.kind == Kind::kString && b.kind == Kind::kString) return a.str() == b.str();
  return equals(a, b);
}
}  // namespace

const Value* Object::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (key_equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.kind == Kind::kString && k.str() == key) return &v;
  }
  return nullptr;
}

void Object::set(const Value& key, Value value) {
  for (auto& [k, v] : entries) {
    if (key_equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(std::string_view name, int index) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  if (index >= 0 && static_cast<std::size_t>(index) < positional.size()) {
    return &positional[static_cast<std::size_t>(index)];
  }
  return nullptr;
}

void fail(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message, "chat_template");
}

void fail_undefined(const Value& v) { fail(v.s ? *v.s : std::string("'None' is undefined")); }

std::string python_type_name(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return v.b ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kFunction:
      return "function";
  }
  return "object";
}

std::string object_type_name(const Value& v) {
  if (v.kind == Kind::kNone) return "None";
  return python_type_name(v) + " object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.b;
    case Kind::kInt:
      return v.i != 0;
    case Kind::kFloat:
      return v.f != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
      return !v.items().empty();
    case Kind::kDict:
      return !v.dict->entries.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

double as_double(const Value& v) {
  if (v.kind == Kind::kFloat) return v.f;
  if (v.kind == Kind::kInt) return static_cast<double>(v.i);
  if (v.kind == Kind::kBool) return v.b ? 1.0 : 0.0;
  return 0.0;
}

namespace {
bool int_like(const Value& v) { return v.kind == Kind::kInt || v.kind == Kind::kBool; }
std::int64_t int_of(const Value& v) { return v.kind == Kind::kInt ? v.i : (v.b ? 1 : 0); }

bool dict_equals(const Object& a, const Object& b) {
  if (a.entries.size() != b.entries.size()) return false;
  for (const auto& [k, v] : a.entries) {
    const Value* other = b.find(k);
    if (other == nullptr || !equals(v, *other)) return false;
  }
  return true;
}
}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (int_like(a) && int_like(b)) return int_of(a) == int_of(b);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.b != b.b || a.items().size() != b.items().size()) return false;
      for (std::size_t k = 0; k < a.items().size(); ++k) {
        if (!equals(a.items()[k], b.items()[k])) return false;
      }
      return true;
    }
    case Kind::kDict:
      return dict_equals(*a.dict, *b.dict);
    case Kind::kNamespace:
      return a.dict == b.dict;
    case Kind::kFunction:
      return a.fn == b.fn;
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (int_like(a) && int_like(b)) return int_of(a) < int_of(b);
    return as_double(a) < as_double(b);
  }
  if (a.kind == Kind::kString && b.kind == Kind::kString) return a.str() < b.str();
  if (a.kind == Kind::kList && b.kind == Kind::kList && a.b == b.b) {
    const Array& x = a.items();
    const Array& y = b.items();
    for (std::size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equals(x[k], y[k])) return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + python_type_name(a) + "' and '" +
       python_type_name(b) + "'");
}

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  std::size_t k = 0;
  while (k < s.size()) {
    std::size_t n = 1;
    const auto c = static_cast<unsigned char>(s[k]);
    if (c >= 0xF0) {
      n = 4;
    } else if (c >= 0xE0) {
      n = 3;
    } else if (c >= 0xC0) {
      n = 2;
    }
    if (k + n > s.size()) n = s.size() - k;
    out.emplace_back(s.substr(k, n));
    k += n;
  }
  return out;
}

std::size_t code_point_count(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

Array iterate(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return v.items();
    case Kind::kDict: {
      Array keys;
      keys.reserve(v.dict->entries.size());
      for (const auto& e : v.dict->entries) keys.push_back(e.first);
      return keys;
    }
    case Kind::kString: {
      Array chars;
      for (auto& c : code_points(v.str())) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default:
      fail("'" + python_type_name(v) + "' object is not iterable");
  }
}

Value from_json(const nlohmann::ordered_json& j, std::uint32_t depth) {
  check_depth(depth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return Value::array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto o = std::make_shared<Object>();
      o->entries.reserve(j.size());
      for (const auto& [k, e] : j.items())
        o->entries.emplace_back(Value::string(k), from_json(e, depth + 1));
      return Value::dictionary(std::move(o));
    }
    default:
      return Value::none();
  }
}

}  // namespace detinfer::jinja
