// Jinja2's tests (`x is defined`, `x is divisibleby 3`, ...).
#include <cmath>
#include <string_view>

#include "jinja/render.h"

namespace detinfer::jinja {

namespace {

using TestFn = bool (*)(const Value& v, const CallArgs& args);

const Value& need_arg(const CallArgs& args, const char* test) {
  const Value* other = args.get("value", 0);
  if (other == nullptr) other = args.get("b", 0);
  if (other == nullptr) fail(std::string("test '") + test + "' needs an argument");
  return *other;
}

bool integral(const Value& v) { return v.kind == Kind::kInt; }

std::int64_t int_operand(const Value& v, const char* test) {
  if (v.kind == Kind::kInt) return v.i;
  if (v.kind == Kind::kBool) return v.b ? 1 : 0;
  if (v.is_undefined()) fail_undefined(v);
  fail(std::string("test '") + test + "' needs an integer, not " + python_type_name(v));
}

bool t_defined(const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, const CallArgs&) { return v.kind == Kind::kNone; }
bool t_string(const Value& v, const CallArgs&) { return v.kind == Kind::kString; }
bool t_mapping(const Value& v, const CallArgs&) { return v.kind == Kind::kDict; }
bool t_iterable(const Value& v, const CallArgs&) {
  return v.kind == Kind::kUndefined || v.kind == Kind::kString || v.kind == Kind::kList ||
         v.kind == Kind::kDict;
}
bool t_sequence(const Value& v, const CallArgs& a) { return t_iterable(v, a); }
bool t_number(const Value& v, const CallArgs&) { return v.is_number(); }
bool t_integer(const Value& v, const CallArgs&) { return integral(v); }
bool t_float(const Value& v, const CallArgs&) { return v.kind == Kind::kFloat; }
bool t_boolean(const Value& v, const CallArgs&) { return v.kind == Kind::kBool; }
bool t_true(const Value& v, const CallArgs&) { return v.kind == Kind::kBool && v.b; }
bool t_false(const Value& v, const CallArgs&) { return v.kind == Kind::kBool && !v.b; }
bool t_callable(const Value& v, const CallArgs&) { return v.kind == Kind::kFunction; }
bool t_escaped(const Value&, const CallArgs&) { return false; }
bool t_eq(const Value& v, const CallArgs& a) { return equals(v, need_arg(a, "eq")); }
bool t_ne(const Value& v, const CallArgs& a) { return !equals(v, need_arg(a, "ne")); }
bool t_lt(const Value& v, const CallArgs& a) { return less(v, need_arg(a, "lt")); }
bool t_gt(const Value& v, const CallArgs& a) { return less(need_arg(a, "gt"), v); }
bool t_le(const Value& v, const CallArgs& a) { return !less(need_arg(a, "le"), v); }
bool t_ge(const Value& v, const CallArgs& a) { return !less(v, need_arg(a, "ge")); }
bool t_in(const Value& v, const CallArgs& a) { return contains(need_arg(a, "in"), v); }
bool t_odd(const Value& v, const CallArgs&) { return int_operand(v, "odd") % 2 != 0; }
bool t_even(const Value& v, const CallArgs&) { return int_operand(v, "even") % 2 == 0; }
bool t_divisibleby(const Value& v, const CallArgs& a) {
  const Value* n = a.get("num", 0);
  if (n == nullptr) fail("test 'divisibleby' needs an argument");
  const std::int64_t d = int_operand(*n, "divisibleby");
  if (d == 0) fail("integer division or modulo by zero");
  if (d == -1) return true;
  return int_operand(v, "divisibleby") % d == 0;
}
bool t_sameas(const Value& v, const CallArgs& a) {
  const Value& o = need_arg(a, "sameas");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::kNone:
    case Kind::kUndefined:
      return true;
    case Kind::kBool:
      return v.b == o.b;
    case Kind::kList:
      return v.list == o.list;
    case Kind::kDict:
    case Kind::kNamespace:
      return v.dict == o.dict;
    case Kind::kString:
      return v.s == o.s;
    default:
      return equals(v, o);
  }
}
bool t_lower(const Value& v, const CallArgs&) {
  if (v.kind != Kind::kString) return false;
  bool cased = false;
  for (char c : v.str()) {
    if (c >= 'A' && c <= 'Z') return false;
    cased = cased || (c >= 'a' && c <= 'z');
  }
  return cased;
}
bool t_upper(const Value& v, const CallArgs&) {
  if (v.kind != Kind::kString) return false;
  bool cased = false;
  for (char c : v.str()) {
    if (c >= 'a' && c <= 'z') return false;
    cased = cased || (c >= 'A' && c <= 'Z');
  }
  return cased;
}

struct Entry {
  std::string_view name;
  TestFn fn;
};

const Entry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"number", t_number},
    {"integer", t_integer},
    {"float", t_float},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"callable", t_callable},
    {"escaped", t_escaped},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"le", t_le},
    {"<=", t_le},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"sameas", t_sameas},
    {"lower", t_lower},
    {"upper", t_upper},
};

}  // namespace

bool has_test(const std::string& name) {
  for (const auto& t : kTests) {
    if (name == t.name) return true;
  }
  return false;
}

bool apply_test(Evaluator&, const std::string& name, const Value& operand, const CallArgs& args) {
  for (const auto& t : kTests) {
    if (name == t.name) return t.fn(operand, args);
  }
  fail("No test named '" + name + "'.");
}

}  // namespace detinfer::jinja
