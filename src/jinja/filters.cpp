// Filters on text and numbers, transformers' tojson, and the filter dispatcher.
#include "jinja/filters.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "jinja/strings.h"

namespace detinfer::jinja {

const Value* filter_arg(const CallArgs& args, const char* name, int index) {
  return args.get(name, index);
}

bool bool_arg(const CallArgs& args, const char* name, int index, bool dflt) {
  const Value* v = args.get(name, index);
  return v != nullptr ? truthy(*v) : dflt;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  std::size_t k = 0;
  while (k < s.size()) {
    const std::size_t begin = k;
    const std::uint32_t cp = decode_utf8(s, k);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C ||
                     (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    out.push_back(s.substr(start, begin - start));
    if (cp == '\r' && k < s.size() && s[k] == '\n') ++k;
    start = k;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

namespace {

std::string text_of(const Value& v) { return to_str(v); }

Value f_default(Evaluator&, const Value& v, const CallArgs& a) {
  const bool boolean = bool_arg(a, "boolean", 1, false);
  if (v.is_undefined() || (boolean && !truthy(v))) {
    const Value* d = filter_arg(a, "default_value", 0);
    return d != nullptr ? *d : Value::string("");
  }
  return v;
}

Value f_length(Evaluator&, const Value& v, const CallArgs&) {
  switch (v.kind) {
    case Kind::kUndefined:
      return Value::integer(0);
    case Kind::kString:
      return Value::integer(static_cast<std::int64_t>(code_point_count(v.str())));
    case Kind::kList:
      return Value::integer(static_cast<std::int64_t>(v.items().size()));
    case Kind::kDict:
      return Value::integer(static_cast<std::int64_t>(v.dict->entries.size()));
    default:
      fail("object of type '" + python_type_name(v) + "' has no len()");
  }
}

Value f_string(Evaluator&, const Value& v, const CallArgs&) { return Value::string(text_of(v)); }
Value f_safe(Evaluator&, const Value& v, const CallArgs&) { return v; }
Value f_upper(Evaluator&, const Value& v, const CallArgs&) {
  return Value::string(ascii_upper(text_of(v)));
}
Value f_lower(Evaluator&, const Value& v, const CallArgs&) {
  return Value::string(ascii_lower(text_of(v)));
}
Value f_title(Evaluator&, const Value& v, const CallArgs&) {
  return Value::string(jinja_title(text_of(v)));
}
Value f_capitalize(Evaluator&, const Value& v, const CallArgs&) {
  return Value::string(capitalize_text(text_of(v)));
}

Value f_trim(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* chars = filter_arg(a, "chars", 0);
  const bool custom = chars != nullptr && chars->kind == Kind::kString;
  return Value::string(strip_text(text_of(v), custom ? chars->str() : "", custom, true, true));
}

Value f_replace(Evaluator& e, const Value& v, const CallArgs& a) {
  const Value* from = filter_arg(a, "old", 0);
  const Value* to = filter_arg(a, "new", 1);
  const Value* count = filter_arg(a, "count", 2);
  if (from == nullptr || to == nullptr) fail("replace() needs old and new");
  return Value::string(replace_text(e, text_of(v), to_str(*from), to_str(*to),
                                    count != nullptr && count->kind == Kind::kInt ? count->i : -1));
}

Value f_escape(Evaluator& e, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : text_of(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  e.charge_string(out.size());
  return Value::string(std::move(out));
}

Value f_indent(Evaluator& e, const Value& v, const CallArgs& a) {
  const Value* width = filter_arg(a, "width", 0);
  std::string pad = "    ";
  if (width != nullptr && width->kind == Kind::kString) pad = width->str();
  if (width != nullptr && width->kind == Kind::kInt) {
    e.charge_string(static_cast<std::size_t>(std::max<std::int64_t>(width->i, 0)));
    pad = std::string(static_cast<std::size_t>(std::max<std::int64_t>(width->i, 0)), ' ');
  }
  const bool first = bool_arg(a, "first", 1, false);
  const bool blank = bool_arg(a, "blank", 2, false);
  std::vector<std::string> lines = split_lines(text_of(v) + "\n");
  std::string out;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) out += "\n";
    if (k > 0 && (blank || !lines[k].empty())) out += pad;
    out += lines[k];
    e.charge_string(out.size());
  }
  if (first) out = pad + out;
  e.charge_string(out.size());
  return Value::string(std::move(out));
}

Value f_center(Evaluator& e, const Value& v, const CallArgs& a) {
  const Value* w = filter_arg(a, "width", 0);
  const std::int64_t width = w != nullptr && w->kind == Kind::kInt ? w->i : 80;
  std::string s = text_of(v);
  const auto n = static_cast<std::int64_t>(code_point_count(s));
  if (width <= n) return Value::string(std::move(s));
  e.charge_string(static_cast<std::size_t>(width));
  const std::int64_t total = width - n;
  const std::int64_t left = total / 2 + (total & width & 1);  // CPython's pad rule
  return Value::string(std::string(static_cast<std::size_t>(left), ' ') + s +
                       std::string(static_cast<std::size_t>(total - left), ' '));
}

Value f_wordcount(Evaluator&, const Value& v, const CallArgs&) {
  std::int64_t n = 0;
  bool in_word = false;
  for (char c : text_of(v)) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' ||
                      (static_cast<unsigned char>(c) & 0x80);
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::integer(n);
}

bool parse_int(std::string s, std::int64_t base, std::int64_t& out) {
  s = strip_text(s, "", false, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(s.c_str(), &end, static_cast<int>(base));
  return errno == 0 && end != nullptr && *end == '\0';
}

Value f_int(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* d = filter_arg(a, "default", 0);
  const Value* b = filter_arg(a, "base", 1);
  const Value dflt = d != nullptr ? *d : Value::integer(0);
  if (v.kind == Kind::kInt) return v;
  if (v.kind == Kind::kBool) return Value::integer(v.b ? 1 : 0);
  if (v.kind == Kind::kFloat) {
    if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return dflt;
    return Value::integer(static_cast<std::int64_t>(v.f));
  }
  if (v.kind != Kind::kString) return dflt;
  std::int64_t out = 0;
  if (parse_int(v.str(), b != nullptr && b->kind == Kind::kInt ? b->i : 10, out))
    return Value::integer(out);
  char* end = nullptr;
  const std::string s = strip_text(v.str(), "", false, true, true);
  const double f = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == '\0' && std::isfinite(f) && std::fabs(f) < 9.2e18) {
    return Value::integer(static_cast<std::int64_t>(f));
  }
  return dflt;
}

Value f_float(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* d = filter_arg(a, "default", 0);
  const Value dflt = d != nullptr ? *d : Value::number(0.0);
  if (v.is_number()) return Value::number(as_double(v));
  if (v.kind != Kind::kString) return dflt;
  const std::string s = strip_text(v.str(), "", false, true, true);
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return dflt;
  return Value::number(f);
}

Value f_abs(Evaluator&, const Value& v, const CallArgs&) {
  if (v.kind == Kind::kInt) {
    if (v.i == INT64_MIN) fail("integer overflow");
    return Value::integer(v.i < 0 ? -v.i : v.i);
  }
  if (v.kind == Kind::kBool) return Value::integer(v.b ? 1 : 0);
  if (v.kind == Kind::kFloat) return Value::number(std::fabs(v.f));
  fail("bad operand type for abs(): '" + python_type_name(v) + "'");
}

Value f_round(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* p = filter_arg(a, "precision", 0);
  const Value* m = filter_arg(a, "method", 1);
  const std::int64_t precision = p != nullptr && p->kind == Kind::kInt ? p->i : 0;
  const std::string method = m != nullptr && m->kind == Kind::kString ? m->str() : "common";
  if (!v.is_number()) fail("round() needs a number, not " + python_type_name(v));
  if (method != "common" && method != "ceil" && method != "floor") {
    fail("method must be 'common', 'ceil' or 'floor'");
  }
  const double x = as_double(v);
  if (method == "common") {
    if (v.kind != Kind::kFloat) return Value::integer(static_cast<std::int64_t>(x));
    if (precision < 0 || precision > 300 || !std::isfinite(x)) return Value::number(x);
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);  // round half even
    return Value::number(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
  return Value::number(r / scale);
}

Value f_tojson(Evaluator& e, const Value& v, const CallArgs& a) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  JsonOptions options;
  options.ensure_ascii = bool_arg(a, "ensure_ascii", 0, false);
  const Value* indent = filter_arg(a, "indent", 1);
  if (indent != nullptr && indent->kind == Kind::kInt) {
    options.indent =
        static_cast<int>(std::min<std::int64_t>(std::max<std::int64_t>(indent->i, 0), 1024));
  }
  const Value* seps = filter_arg(a, "separators", 2);
  if (seps != nullptr && seps->kind == Kind::kList && seps->items().size() == 2) {
    options.has_separators = true;
    options.item_separator = to_str(seps->items()[0]);
    options.key_separator = to_str(seps->items()[1]);
  }
  options.sort_keys = bool_arg(a, "sort_keys", 3, false);
  std::string out = to_json(v, options);
  e.charge_string(out.size());
  return Value::string(std::move(out));
}

Value f_format(Evaluator& e, const Value& v, const CallArgs& a) {
  Value args = Value::array(a.positional, true);
  if (!a.keyword.empty()) {
    auto o = std::make_shared<Object>();
    for (const auto& [k, x] : a.keyword) o->set(Value::string(k), x);
    args = Value::dictionary(std::move(o));
  }
  return Value::string(percent_format(e, text_of(v), args));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"default", f_default},
    {"d", f_default},
    {"length", f_length},
    {"count", f_length},
    {"string", f_string},
    {"safe", f_safe},
    {"upper", f_upper},
    {"lower", f_lower},
    {"title", f_title},
    {"capitalize", f_capitalize},
    {"trim", f_trim},
    {"replace", f_replace},
    {"e", f_escape},
    {"escape", f_escape},
    {"forceescape", f_escape},
    {"indent", f_indent},
    {"center", f_center},
    {"wordcount", f_wordcount},
    {"int", f_int},
    {"float", f_float},
    {"abs", f_abs},
    {"round", f_round},
    {"tojson", f_tojson},
    {"format", f_format},
};

}  // namespace

bool has_filter(const std::string& name) {
  for (const auto& f : kFilters) {
    if (name == f.name) return true;
  }
  return find_sequence_filter(name) != nullptr;
}

Value apply_filter(Evaluator& e, const std::string& name, const Value& operand,
                   const CallArgs& args) {
  for (const auto& f : kFilters) {
    if (name == f.name) return f.fn(e, operand, args);
  }
  if (FilterFn fn = find_sequence_filter(name)) return fn(e, operand, args);
  fail("No filter named '" + name + "'.");
}

}  // namespace detinfer::jinja
