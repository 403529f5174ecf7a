// Methods of str, dict and list that templates call. Mutating methods are refused as
// Jinja2's ImmutableSandboxedEnvironment refuses them.
#include <algorithm>
#include <string_view>

#include "jinja/render.h"
#include "jinja/strings.h"

namespace detinfer::jinja {

namespace {

using Method = Value (*)(Evaluator&, const Value& self, const CallArgs& args);

const Value* arg(const CallArgs& args, const char* name, int index) {
  return args.get(name, index);
}

std::string str_arg(const CallArgs& args, const char* name, int index, const char* method) {
  const Value* v = arg(args, name, index);
  if (v == nullptr || v->kind != Kind::kString) {
    fail(std::string(method) + "() argument must be str, not " +
         (v == nullptr ? std::string("nothing") : python_type_name(*v)));
  }
  return v->str();
}

Value strip_impl(const Value& self, const CallArgs& args, bool left, bool right) {
  const Value* chars = arg(args, "chars", 0);
  const bool custom = chars != nullptr && chars->kind == Kind::kString;
  return Value::string(
      strip_text(self.str(), custom ? chars->str() : std::string(), custom, left, right));
}
Value m_strip(Evaluator&, const Value& s, const CallArgs& a) {
  return strip_impl(s, a, true, true);
}
Value m_lstrip(Evaluator&, const Value& s, const CallArgs& a) {
  return strip_impl(s, a, true, false);
}
Value m_rstrip(Evaluator&, const Value& s, const CallArgs& a) {
  return strip_impl(s, a, false, true);
}

Value split_impl(const Value& self, const CallArgs& args, bool from_right) {
  const Value* sep = arg(args, "sep", 0);
  const Value* max = arg(args, "maxsplit", 1);
  const std::int64_t maxsplit = max != nullptr && max->kind == Kind::kInt ? max->i : -1;
  std::vector<std::string> parts;
  if (sep == nullptr || sep->kind == Kind::kNone) {
    parts = split_whitespace(self.str(), maxsplit, from_right);
  } else {
    if (sep->kind != Kind::kString) fail("must be str or None, not " + python_type_name(*sep));
    if (sep->str().empty()) fail("empty separator");
    parts = split_text(self.str(), sep->str(), maxsplit, from_right);
  }
  Array out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}
Value m_split(Evaluator&, const Value& s, const CallArgs& a) { return split_impl(s, a, false); }
Value m_rsplit(Evaluator&, const Value& s, const CallArgs& a) { return split_impl(s, a, true); }

Value m_splitlines(Evaluator&, const Value& s, const CallArgs&) {
  Array out;
  const std::string& t = s.str();
  std::size_t start = 0;
  for (std::size_t k = 0; k < t.size(); ++k) {
    if (t[k] == '\n' || t[k] == '\r') {
      out.push_back(Value::string(t.substr(start, k - start)));
      if (t[k] == '\r' && k + 1 < t.size() && t[k + 1] == '\n') ++k;
      start = k + 1;
    }
  }
  if (start < t.size()) out.push_back(Value::string(t.substr(start)));
  return Value::array(std::move(out));
}

Value affix_impl(const Value& self, const CallArgs& args, bool prefix) {
  const Value* what = arg(args, prefix ? "prefix" : "suffix", 0);
  if (what == nullptr) fail("startswith/endswith takes at least 1 argument");
  Array options;
  if (what->kind == Kind::kString) {
    options.push_back(*what);
  } else if (what->kind == Kind::kList && what->b) {
    options = what->items();
  } else {
    fail(std::string(prefix ? "startswith" : "endswith") +
         " first arg must be str or a tuple of str, not " + python_type_name(*what));
  }
  const std::string& s = self.str();
  for (const Value& o : options) {
    if (o.kind != Kind::kString) fail("tuple for startswith/endswith must only contain str");
    const std::string& x = o.str();
    if (x.size() > s.size()) continue;
    if (prefix ? s.compare(0, x.size(), x) == 0
               : s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}
Value m_startswith(Evaluator&, const Value& s, const CallArgs& a) { return affix_impl(s, a, true); }
Value m_endswith(Evaluator&, const Value& s, const CallArgs& a) { return affix_impl(s, a, false); }

Value m_upper(Evaluator&, const Value& s, const CallArgs&) {
  return Value::string(ascii_upper(s.str()));
}
Value m_lower(Evaluator&, const Value& s, const CallArgs&) {
  return Value::string(ascii_lower(s.str()));
}
Value m_title(Evaluator&, const Value& s, const CallArgs&) {
  return Value::string(python_title(s.str()));
}
Value m_capitalize(Evaluator&, const Value& s, const CallArgs&) {
  return Value::string(capitalize_text(s.str()));
}

Value m_replace(Evaluator& e, const Value& s, const CallArgs& a) {
  const std::string from = str_arg(a, "old", 0, "replace");
  const std::string to = str_arg(a, "new", 1, "replace");
  const Value* count = arg(a, "count", 2);
  std::string out = replace_text(e, s.str(), from, to,
                                 count != nullptr && count->kind == Kind::kInt ? count->i : -1);
  return Value::string(std::move(out));
}

Value find_impl(const Value& s, const CallArgs& a, bool from_right) {
  const std::string sub = str_arg(a, "sub", 0, "find");
  const std::size_t at = from_right ? s.str().rfind(sub) : s.str().find(sub);
  if (at == std::string::npos) return Value::integer(-1);
  return Value::integer(static_cast<std::int64_t>(code_point_count(s.str().substr(0, at))));
}
Value m_find(Evaluator&, const Value& s, const CallArgs& a) { return find_impl(s, a, false); }
Value m_rfind(Evaluator&, const Value& s, const CallArgs& a) { return find_impl(s, a, true); }

Value m_count(Evaluator&, const Value& s, const CallArgs& a) {
  if (s.kind == Kind::kList) {
    const Value* x = arg(a, "value", 0);
    if (x == nullptr) fail("count() takes exactly one argument");
    return Value::integer(std::count_if(s.items().begin(), s.items().end(),
                                        [&](const Value& v) { return equals(v, *x); }));
  }
  const std::string sub = str_arg(a, "sub", 0, "count");
  if (sub.empty()) return Value::integer(static_cast<std::int64_t>(code_point_count(s.str()) + 1));
  std::int64_t n = 0;
  for (std::size_t at = s.str().find(sub); at != std::string::npos;
       at = s.str().find(sub, at + sub.size()))
    ++n;
  return Value::integer(n);
}

Value m_join(Evaluator& e, const Value& s, const CallArgs& a) {
  const Value* items = arg(a, "iterable", 0);
  if (items == nullptr) fail("join() takes exactly one argument");
  std::string out;
  bool first = true;
  for (const Value& v : iterate(*items)) {
    if (v.kind != Kind::kString)
      fail("sequence item: expected str instance, " + python_type_name(v) + " found");
    if (!first) out += s.str();
    first = false;
    out += v.str();
    e.charge_string(out.size());
  }
  return Value::string(std::move(out));
}

Value char_class(const Value& s, int (*pred)(int)) {
  if (s.str().empty()) return Value::boolean(false);
  for (char c : s.str()) {
    if (pred(static_cast<unsigned char>(c)) == 0) return Value::boolean(false);
  }
  return Value::boolean(true);
}
Value m_isdigit(Evaluator&, const Value& s, const CallArgs&) { return char_class(s, isdigit); }
Value m_isalpha(Evaluator&, const Value& s, const CallArgs&) { return char_class(s, isalpha); }
Value m_isalnum(Evaluator&, const Value& s, const CallArgs&) { return char_class(s, isalnum); }
Value m_isspace(Evaluator&, const Value& s, const CallArgs&) { return char_class(s, isspace); }

Value m_items(Evaluator&, const Value& d, const CallArgs&) {
  Array out;
  for (const auto& [k, v] : d.dict->entries) out.push_back(Value::array({k, v}, true));
  return Value::array(std::move(out));
}
Value m_keys(Evaluator&, const Value& d, const CallArgs&) { return Value::array(iterate(d)); }
Value m_values(Evaluator&, const Value& d, const CallArgs&) {
  Array out;
  for (const auto& e : d.dict->entries) out.push_back(e.second);
  return Value::array(std::move(out));
}
Value m_get(Evaluator&, const Value& d, const CallArgs& a) {
  const Value* key = arg(a, "key", 0);
  if (key == nullptr) fail("get expected at least 1 argument, got 0");
  if (const Value* v = d.dict->find(*key)) return *v;
  const Value* dflt = arg(a, "default", 1);
  return dflt != nullptr ? *dflt : Value::none();
}

Value m_index(Evaluator&, const Value& l, const CallArgs& a) {
  const Value* x = arg(a, "value", 0);
  if (x == nullptr) fail("index expected at least 1 argument, got 0");
  for (std::size_t k = 0; k < l.items().size(); ++k) {
    if (equals(l.items()[k], *x)) return Value::integer(static_cast<std::int64_t>(k));
  }
  fail(to_repr(*x) + " is not in list");
}

struct MethodEntry {
  Kind kind;
  std::string_view name;
  Method method;
};

const MethodEntry kMethods[] = {
    {Kind::kString, "strip", m_strip},
    {Kind::kString, "lstrip", m_lstrip},
    {Kind::kString, "rstrip", m_rstrip},
    {Kind::kString, "split", m_split},
    {Kind::kString, "rsplit", m_rsplit},
    {Kind::kString, "splitlines", m_splitlines},
    {Kind::kString, "startswith", m_startswith},
    {Kind::kString, "endswith", m_endswith},
    {Kind::kString, "upper", m_upper},
    {Kind::kString, "lower", m_lower},
    {Kind::kString, "title", m_title},
    {Kind::kString, "capitalize", m_capitalize},
    {Kind::kString, "replace", m_replace},
    {Kind::kString, "find", m_find},
    {Kind::kString, "rfind", m_rfind},
    {Kind::kString, "count", m_count},
    {Kind::kString, "join", m_join},
    {Kind::kString, "isdigit", m_isdigit},
    {Kind::kString, "isalpha", m_isalpha},
    {Kind::kString, "isalnum", m_isalnum},
    {Kind::kString, "isspace", m_isspace},
    {Kind::kDict, "items", m_items},
    {Kind::kDict, "keys", m_keys},
    {Kind::kDict, "values", m_values},
    {Kind::kDict, "get", m_get},
    {Kind::kList, "index", m_index},
    {Kind::kList, "count", m_count},
};

const std::string_view kUnsafe[] = {"append",     "extend", "insert",  "pop",    "remove",
                                    "clear",      "sort",   "reverse", "update", "popitem",
                                    "setdefault", "add",    "discard"};

}  // namespace

Value bound_method(const Value& obj, const std::string& name) {
  for (const MethodEntry& m : kMethods) {
    if (m.kind != obj.kind || name != m.name) continue;
    auto fn = std::make_shared<Function>();
    fn->name = name;
    const Method impl = m.method;
    fn->call = [obj, impl](Evaluator& e, const CallArgs& args) { return impl(e, obj, args); };
    Value v;
    v.kind = Kind::kFunction;
    v.fn = std::move(fn);
    return v;
  }
  if (obj.kind == Kind::kList || obj.kind == Kind::kDict) {
    for (const std::string_view unsafe : kUnsafe) {
      if (name == unsafe) {
        return Value::undefined("access to attribute '" + name + "' of '" + python_type_name(obj) +
                                "' object is unsafe.");
      }
    }
  }
  return Value();  // no such method (an undefined without a message)
}

}  // namespace detinfer::jinja
