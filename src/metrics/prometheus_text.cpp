#include "metrics/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace detinfer::metrics {

namespace {
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

bool valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = is_alpha(c) || c == '_' || c == ':' || (i > 0 && is_digit(c));
    if (!ok) return false;
  }
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(is_alpha(c) || c == '_' || (i > 0 && is_digit(c)))) return false;
  }
  return true;
}

namespace {
std::string escape(std::string_view s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

std::string escape_help(std::string_view help) { return escape(help, false); }
std::string escape_label_value(std::string_view value) { return escape(value, true); }

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // Shortest of %.15g..%.17g that reads back exactly.
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string format_labels(const MetricLabels& labels, std::string_view extra_name,
                          std::string_view extra_value) {
  if (labels.empty() && extra_name.empty()) return {};
  std::string out = "{";
  bool first = true;
  auto add = [&](std::string_view name, std::string_view value) {
    if (!first) out += ',';
    first = false;
    out.append(name);
    out += "=\"";
    out += escape_label_value(value);
    out += '"';
  };
  for (const auto& [name, value] : labels) add(name, value);
  if (!extra_name.empty()) add(extra_name, extra_value);
  out += '}';
  return out;
}

}  // namespace detinfer::metrics
