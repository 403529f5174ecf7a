// Attribute/item access, slicing and the binary operators, with Python semantics.
#include <cmath>

#include "jinja/render.h"

namespace detinfer::jinja {

namespace {

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_name(obj) + "' has no attribute '" + name + "'");
}

Value no_element(const Value& obj, const Value& key) {
  return Value::undefined(object_type_name(obj) + " has no element " + to_repr(key));
}

bool int_like(const Value& v) { return v.kind == Kind::kInt || v.kind == Kind::kBool; }
std::int64_t int_of(const Value& v) { return v.kind == Kind::kInt ? v.i : (v.b ? 1 : 0); }

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.kind == Kind::kNamespace) {
    const Value* v = obj.dict->find(name);
    return v != nullptr ? *v : no_attribute(obj, name);
  }
  Value method = bound_method(obj, name);
  if (!method.is_undefined() || method.s) return method;  // a method, or a refused one
  if (obj.kind == Kind::kDict) {
    if (const Value* v = obj.dict->find(name)) return *v;
  }
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (key.is_undefined()) fail_undefined(key);
  if (obj.kind == Kind::kDict) {
    if (const Value* v = obj.dict->find(key)) return *v;
  } else if ((obj.kind == Kind::kList || obj.kind == Kind::kString) && int_like(key)) {
    std::int64_t k = int_of(key);
    if (obj.kind == Kind::kList) {
      const auto n = static_cast<std::int64_t>(obj.items().size());
      if (k < 0) k += n;
      if (k >= 0 && k < n) return obj.items()[static_cast<std::size_t>(k)];
    } else {
      const std::vector<std::string> chars = code_points(obj.str());
      const auto n = static_cast<std::int64_t>(chars.size());
      if (k < 0) k += n;
      if (k >= 0 && k < n) return Value::string(chars[static_cast<std::size_t>(k)]);
    }
    return no_element(obj, key);
  }
  if (key.kind == Kind::kString) return get_attr(obj, key.str());
  return no_element(obj, key);
}

namespace {
// Python's slice.indices(): clamps start/stop for the given step.
void slice_indices(std::int64_t n, const Value& start, const Value& stop, std::int64_t step,
                   std::int64_t& lo, std::int64_t& hi) {
  auto clamp = [&](const Value& v, std::int64_t dflt) {
    if (v.kind == Kind::kNone) return dflt;
    if (!int_like(v)) fail("slice indices must be integers or None");
    std::int64_t k = int_of(v);
    if (k < 0) k += n;
    if (step > 0) return std::min(std::max<std::int64_t>(k, 0), n);
    return std::min(std::max<std::int64_t>(k, -1), n - 1);
  };
  lo = clamp(start, step > 0 ? 0 : n - 1);
  hi = clamp(stop, step > 0 ? n : -1);
}
}  // namespace

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_value) {
  if (obj.is_undefined()) fail_undefined(obj);
  std::int64_t step = 1;
  if (step_value.kind != Kind::kNone) {
    if (!int_like(step_value)) fail("slice indices must be integers or None");
    step = int_of(step_value);
    if (step == 0) fail("slice step cannot be zero");
  }
  std::vector<std::string> chars;
  if (obj.kind == Kind::kString) {
    chars = code_points(obj.str());
  } else if (obj.kind != Kind::kList) {
    fail("'" + python_type_name(obj) + "' object is not subscriptable");
  }
  const auto n =
      static_cast<std::int64_t>(obj.kind == Kind::kString ? chars.size() : obj.items().size());
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  slice_indices(n, start, stop, step, lo, hi);
  std::vector<std::size_t> picks;
  for (std::int64_t k = lo; step > 0 ? k < hi : k > hi; k += step)
    picks.push_back(static_cast<std::size_t>(k));
  if (obj.kind == Kind::kString) {
    std::string out;
    for (std::size_t k : picks) out += chars[k];
    return Value::string(std::move(out));
  }
  Array out;
  out.reserve(picks.size());
  for (std::size_t k : picks) out.push_back(obj.items()[k]);
  return Value::array(std::move(out), obj.b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (item.kind != Kind::kString) {
        fail("'in <string>' requires string as left operand, not " + python_type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
      return container.dict->find(item) != nullptr;
    default:
      fail("argument of type '" + python_type_name(container) + "' is not iterable");
  }
}

namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + std::string(op) + ": '" + python_type_name(a) +
       "' and '" + python_type_name(b) + "'");
}

Value repeat(Evaluator& e, const Value& seq, std::int64_t times) {
  if (times < 0) times = 0;
  if (seq.kind == Kind::kString) {
    const auto bytes = seq.str().size() * static_cast<std::uint64_t>(times);
    if (!seq.str().empty() && bytes / seq.str().size() != static_cast<std::uint64_t>(times)) {
      e.charge_string(SIZE_MAX);
    }
    e.charge_string(bytes);
    std::string out;
    out.reserve(bytes);
    for (std::int64_t k = 0; k < times; ++k) out += seq.str();
    return Value::string(std::move(out));
  }
  const std::uint64_t n = seq.items().size() * static_cast<std::uint64_t>(times);
  e.check_list_size(n);
  Array out;
  out.reserve(n);
  for (std::int64_t k = 0; k < times; ++k)
    out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::array(std::move(out), seq.b);
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (int_like(a) && int_like(b)) {
    const std::int64_t x = int_of(a);
    const std::int64_t y = int_of(b);
    std::int64_t r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::integer(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
    if (op == "//" || op == "%") {
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      std::int64_t q = x / y;
      std::int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op != "/" && op != "**") fail("integer overflow");
  }
  const double x = as_double(a);
  const double y = as_double(b);
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail("float floor division by zero");
    // CPython's float_divmod.
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    double floordiv = std::copysign(0.0, x / y);
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    }
    return Value::number(op == "%" ? mod : floordiv);
  }
  // **
  if (int_like(a) && int_like(b) && int_of(b) >= 0) {
    std::int64_t r = 1;
    for (std::int64_t k = 0; k < int_of(b); ++k) {
      if (__builtin_mul_overflow(r, int_of(a), &r)) fail("integer overflow");
      if (r == 0 || r == 1) break;
    }
    return Value::integer(r);
  }
  if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
  return Value::number(std::pow(x, y));
}

}  // namespace

Value binary_op(Evaluator& e, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out = to_str(a);
    out += to_str(b);
    e.charge_string(out.size());
    return Value::string(std::move(out));
  }
  if (op == "in") return Value::boolean(contains(b, a));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.kind == Kind::kString && b.kind == Kind::kString) {
      e.charge_string(a.str().size() + b.str().size());
      return Value::string(a.str() + b.str());
    }
    if (a.kind == Kind::kList && b.kind == Kind::kList && a.b == b.b) {
      e.check_list_size(a.items().size() + b.items().size());
      Array out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::array(std::move(out), a.b);
    }
    if (a.kind == Kind::kString || a.kind == Kind::kList) {
      fail("can only concatenate " + python_type_name(a) + " (not \"" + python_type_name(b) +
           "\") to " + python_type_name(a));
    }
  }
  if (op == "*") {
    if ((a.kind == Kind::kString || a.kind == Kind::kList) && int_like(b))
      return repeat(e, a, int_of(b));
    if ((b.kind == Kind::kString || b.kind == Kind::kList) && int_like(a))
      return repeat(e, b, int_of(a));
  }
  if (op == "%" && a.kind == Kind::kString) return Value::string(percent_format(e, a.str(), b));
  unsupported(op, a, b);
}

}  // namespace detinfer::jinja
