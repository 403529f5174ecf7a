// The values a template computes with: Python's None, bool, int, float, str, list/tuple,
// dict (insertion ordered), Jinja2's Undefined and namespace, and callables.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detinfer/error.h"

namespace detinfer::jinja {

// How deeply lists and dicts may nest (deeper: Error kResourceExhausted).
inline constexpr std::uint32_t kMaxValueDepth = 512;
// The longest text str(), repr() or tojson of one list or dict may produce (a list may
// hold one long string many times); longer: Error kResourceExhausted.
inline constexpr std::size_t kMaxPrintedBytes = std::size_t{64} << 20;
// Throws Error(kResourceExhausted) when `text` is longer than kMaxPrintedBytes.
void check_printed_size(const std::string& text);

enum class Kind : std::uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // a list, or a tuple when Value::b is set
  kDict,
  kNamespace,
  kFunction,
};

struct Value;
struct Object;
struct Function;
using Array = std::vector<Value>;

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;  // kBool: the value; kList: a tuple
  std::int64_t i = 0;
  double f = 0;
  // kString: the text; kUndefined: the message an operation on it raises ("'x' is undefined").
  std::shared_ptr<const std::string> s;
  std::shared_ptr<const Array> list;   // kList
  std::shared_ptr<Object> dict;        // kDict (never changed once built), kNamespace
  std::shared_ptr<const Function> fn;  // kFunction
  // Nesting of lists and dicts (0 for scalars). Bounded by kMaxValueDepth, so the
  // recursive functions below (printing, JSON, comparison) never recurse deeper.
  std::uint32_t depth = 0;

  // A value of kind `k` with the given payload (members a kind does not use stay empty).
  static Value make(Kind k, bool b = false, std::int64_t i = 0, double f = 0,
                    std::shared_ptr<const std::string> s = nullptr) {
    Value v;
    v.kind = k;
    v.b = b;
    v.i = i;
    v.f = f;
    v.s = std::move(s);
    return v;
  }
  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool x) { return make(Kind::kBool, x); }
  static Value integer(std::int64_t x) { return make(Kind::kInt, false, x); }
  static Value number(double x) { return make(Kind::kFloat, false, 0, x); }
  static Value string(std::string x) {
    return make(Kind::kString, false, 0, 0, std::make_shared<const std::string>(std::move(x)));
  }
  static Value array(Array items, bool tuple = false);
  static Value dictionary(std::shared_ptr<Object> o);
  static Value undefined(std::string message) {
    return make(Kind::kUndefined, false, 0, 0,
                std::make_shared<const std::string>(std::move(message)));
  }

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  bool is_mapping() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
  const std::string& str() const { return *s; }
  const Array& items() const { return *list; }
};

// A dict (or namespace): insertion-ordered keys, as in Python.
struct Object {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  Array positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument named `name`, else the positional one at `index` (-1: none), else null.
  const Value* get(std::string_view name, int index) const;
};

class Evaluator;
struct Function {
  std::string name;
  std::function<Value(Evaluator&, const CallArgs&)> call;
};

// Python-style errors raised while rendering (Error kInvalidArgument, field chat_template).
[[noreturn]] void fail(const std::string& message);
// Raises the UndefinedError of an undefined value.
[[noreturn]] void fail_undefined(const Value& v);

// "'dict object'"-style names Jinja2 uses in messages ("dict object", "None", ...).
std::string object_type_name(const Value& v);
// Python's type name: "str", "int", "list", "dict", ...
std::string python_type_name(const Value& v);

bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// Python ordering (<) for numbers, strings and sequences; TypeError otherwise.
bool less(const Value& a, const Value& b);
double as_double(const Value& v);  // numbers and bools

// Python str() and repr().
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
void append_str(std::string& out, const Value& v);
std::string float_repr(double x);
std::string string_repr(std::string_view s);

struct JsonOptions {
  int indent = -1;             // -1: None
  std::string item_separator;  // "" means the default for the indent
  std::string key_separator;
  bool has_separators = false;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps as transformers' tojson calls it.
std::string to_json(const Value& v, const JsonOptions& options);

// Converts the render context (Error kResourceExhausted beyond kMaxValueDepth levels).
Value from_json(const nlohmann::ordered_json& j, std::uint32_t depth = 0);

// Iterates a value as Jinja2's for loop does: lists and tuples by item, dicts by key,
// strings by character; undefined is empty. Other kinds raise a TypeError.
Array iterate(const Value& v);
// Splits UTF-8 text into code points (each a string).
std::vector<std::string> code_points(const std::string& s);
std::size_t code_point_count(const std::string& s);

}  // namespace detinfer::jinja
