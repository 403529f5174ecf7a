// json.dumps(x, ensure_ascii, indent, separators, sort_keys), as transformers' tojson
// filter calls it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/value.h"

namespace detinfer::jinja {
namespace {

struct JsonWriter {
  const JsonOptions& options;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  void newline(int level) {
    check_printed_size(out);
    out += '\n';
    out.append(static_cast<std::size_t>(options.indent) * static_cast<std::size_t>(level), ' ');
  }

  void escape_char(std::uint32_t cp) {
    char buf[16];
    if (cp >= 0x10000) {
      const std::uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
  }

  void string(std::string_view s) {
    out += '"';
    for (std::size_t k = 0; k < s.size(); ++k) {
      const auto c = static_cast<unsigned char>(s[k]);
      switch (c) {
        case '"':
          out += "\\\"";
          continue;
        case '\\':
          out += "\\\\";
          continue;
        case '\n':
          out += "\\n";
          continue;
        case '\r':
          out += "\\r";
          continue;
        case '\t':
          out += "\\t";
          continue;
        case '\b':
          out += "\\b";
          continue;
        case '\f':
          out += "\\f";
          continue;
        default:
          break;
      }
      if (c < 0x20) {
        escape_char(c);
      } else if (c >= 0x80 && options.ensure_ascii) {
        int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        std::uint32_t cp = n == 3 ? (c & 0x07u) : n == 2 ? (c & 0x0Fu) : (c & 0x1Fu);
        for (; n > 0 && k + 1 < s.size(); --n)
          cp = (cp << 6) | (static_cast<unsigned char>(s[++k]) & 0x3Fu);
        escape_char(cp);
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }

  void number(double x) {
    if (std::isnan(x)) {
      out += "NaN";
    } else if (std::isinf(x)) {
      out += x < 0 ? "-Infinity" : "Infinity";
    } else {
      out += float_repr(x);
    }
  }

  std::string key_text(const Value& k) {
    switch (k.kind) {
      case Kind::kString:
        return k.str();
      case Kind::kInt:
        return std::to_string(k.i);
      case Kind::kBool:
        return k.b ? "true" : "false";
      case Kind::kNone:
        return "null";
      case Kind::kFloat:
        return float_repr(k.f);
      default:
        fail("keys must be str, int, float, bool or None, not " + python_type_name(k));
    }
  }

  void list(const Array& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k > 0) out += item_sep;
      if (options.indent >= 0) newline(level + 1);
      value(items[k], level + 1);
      check_printed_size(out);
    }
    if (options.indent >= 0) newline(level);
    out += ']';
  }

  void dict(const Object& o, int level) {
    if (o.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    entries.reserve(o.entries.size());
    for (const auto& [k, v] : o.entries) entries.emplace_back(key_text(k), &v);
    if (options.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out += '{';
    for (std::size_t k = 0; k < entries.size(); ++k) {
      if (k > 0) out += item_sep;
      if (options.indent >= 0) newline(level + 1);
      string(entries[k].first);
      out += key_sep;
      value(*entries[k].second, level + 1);
      check_printed_size(out);
    }
    if (options.indent >= 0) newline(level);
    out += '}';
  }

  void value(const Value& v, int level) {
    switch (v.kind) {
      case Kind::kNone:
        out += "null";
        return;
      case Kind::kBool:
        out += v.b ? "true" : "false";
        return;
      case Kind::kInt:
        out += std::to_string(v.i);
        return;
      case Kind::kFloat:
        number(v.f);
        return;
      case Kind::kString:
        string(v.str());
        return;
      case Kind::kList:
        list(v.items(), level);
        return;
      case Kind::kDict:
        dict(*v.dict, level);
        return;
      default:
        fail("Object of type " + python_type_name(v) + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonWriter w{options, options.item_separator, options.key_separator, {}};
  if (!options.has_separators) {
    w.item_sep = options.indent >= 0 ? "," : ", ";
    w.key_sep = ": ";
  }
  w.value(v, 0);
  return std::move(w.out);
}

}  // namespace detinfer::jinja
