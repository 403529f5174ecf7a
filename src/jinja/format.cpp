// Python's str(), repr() and json.dumps() of template values.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/strings.h"
#include "jinja/value.h"

namespace detinfer::jinja {

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e(+|-)XX
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    std::string out = sign + digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + ebuf;
  }
  if (decpt <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
  if (decpt >= n)
    return sign + digits + std::string(static_cast<std::size_t>(decpt - n), '0') + ".0";
  return sign + digits.substr(0, static_cast<std::size_t>(decpt)) + "." +
         digits.substr(static_cast<std::size_t>(decpt));
}

namespace {

// Python's str.isprintable() is false for these (control, format, separators other
// than ' ', private use).
bool printable(std::uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp < 0x370) return true;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x180E)
    return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F))
    return false;
  if ((cp >= 0x205F && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000)
    return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB))
    return false;
  if (cp >= 0xE0000) return false;
  return true;
}

void append_hex(std::string& out, const char* prefix, std::uint32_t cp, int width) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, width, cp);
  out += buf;
}

}  // namespace

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  std::size_t k = 0;
  while (k < s.size()) {
    const std::size_t start = k;
    const std::uint32_t cp = decode_utf8(s, k);
    if (cp == '\\' || cp == static_cast<std::uint32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (printable(cp)) {
      out.append(s.substr(start, k - start));
    } else if (cp < 0x100) {
      append_hex(out, "\\x", cp, 2);
    } else if (cp < 0x10000) {
      append_hex(out, "\\u", cp, 4);
    } else {
      append_hex(out, "\\U", cp, 8);
    }
  }
  out += quote;
  return out;
}

namespace {

void append_repr(std::string& out, const Value& v);

void append_sequence(std::string& out, const Value& v) {
  out += v.b ? '(' : '[';
  const Array& items = v.items();
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (k > 0) out += ", ";
    append_repr(out, items[k]);
    check_printed_size(out);
  }
  if (v.b && items.size() == 1) out += ',';
  out += v.b ? ')' : ']';
}

void append_dict(std::string& out, const Object& o) {
  out += '{';
  bool first = true;
  for (const auto& [k, e] : o.entries) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    if (e.kind == Kind::kNamespace) {
      out += "<Namespace>";  // namespaces may contain themselves: never recurse into one
    } else {
      append_repr(out, e);
    }
    check_printed_size(out);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v) {
  if (v.kind == Kind::kString) {
    out += string_repr(v.str());
  } else if (v.kind == Kind::kUndefined) {
    out += "Undefined";
  } else {
    append_str(out, v);
  }
}

}  // namespace

void append_str(std::string& out, const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += v.b ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(v.i);
      return;
    case Kind::kFloat:
      out += float_repr(v.f);
      return;
    case Kind::kString:
      out += v.str();
      return;
    case Kind::kList:
      append_sequence(out, v);
      return;
    case Kind::kDict:
      append_dict(out, *v.dict);
      return;
    case Kind::kNamespace:
      out += "<Namespace ";
      append_dict(out, *v.dict);
      out += '>';
      return;
    case Kind::kFunction:
      out += "<function " + v.fn->name + ">";
      return;
  }
}

std::string to_str(const Value& v) {
  if (v.kind == Kind::kString) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

}  // namespace detinfer::jinja
