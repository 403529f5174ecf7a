// Python's printf-style string formatting (`"%s: %d" % (a, b)` and the format filter).
#include <cmath>
#include <cstdio>

#include "jinja/render.h"

namespace detinfer::jinja {

namespace {

struct Spec {
  std::string key;  // %(key)s
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

std::string format_one(const Spec& spec, const Value& v) {
  std::string body;
  switch (spec.type) {
    case 's':
      body = to_str(v);
      break;
    case 'r':
    case 'a':
      body = to_repr(v);
      break;
    case 'd':
    case 'i':
    case 'u':
      if (!v.is_number()) fail("%d format: a real number is required, not " + python_type_name(v));
      body = v.kind == Kind::kFloat ? std::to_string(static_cast<std::int64_t>(v.f))
                                    : std::to_string(v.kind == Kind::kInt ? v.i : (v.b ? 1 : 0));
      break;
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) fail("must be real number, not " + python_type_name(v));
      char fmt[8] = {'%', '.', '*', spec.type, 0};
      char buf[512];
      std::snprintf(buf, sizeof(buf), fmt, spec.precision < 0 ? 6 : std::min(spec.precision, 300),
                    as_double(v));
      body = buf;
      break;
    }
    case 'x':
    case 'X':
    case 'o': {
      if (v.kind != Kind::kInt)
        fail("%x format: an integer is required, not " + python_type_name(v));
      char fmt[4] = {'%', 'l', spec.type, 0};
      char lfmt[5] = {'%', 'l', 'l', spec.type, 0};
      char buf[64];
      std::snprintf(buf, sizeof(buf), lfmt, static_cast<long long>(v.i));
      (void)fmt;
      body = buf;
      break;
    }
    default:
      fail(std::string("unsupported format character '") + spec.type + "'");
  }
  if ((spec.type == 's' || spec.type == 'r') && spec.precision >= 0 &&
      body.size() > static_cast<std::size_t>(spec.precision)) {
    body.resize(static_cast<std::size_t>(spec.precision));
  }
  const auto width = static_cast<std::size_t>(std::max(spec.width, 0));
  if (body.size() < width) {
    const std::string pad(
        width - body.size(),
        spec.flags.find('0') != std::string::npos && spec.type != 's' ? '0' : ' ');
    body = spec.flags.find('-') != std::string::npos ? body + std::string(pad.size(), ' ')
                                                     : pad + body;
  }
  return body;
}

int read_number(const std::string& fmt, std::size_t& k) {
  int n = 0;
  while (k < fmt.size() && fmt[k] >= '0' && fmt[k] <= '9' && n < 100000)
    n = n * 10 + (fmt[k++] - '0');
  return n;
}

}  // namespace

std::string percent_format(Evaluator& e, const std::string& fmt, const Value& args) {
  const bool tuple = args.kind == Kind::kList && args.b;
  const Array positional = tuple ? args.items() : Array{args};
  std::size_t used = 0;
  std::string out;
  for (std::size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) fail("incomplete format");
    Spec spec;
    if (fmt[k] == '(') {
      const std::size_t close = fmt.find(')', k);
      if (close == std::string::npos) fail("incomplete format key");
      spec.key = fmt.substr(k + 1, close - k - 1);
      k = close + 1;
    }
    while (k < fmt.size() && std::string("-+ #0").find(fmt[k]) != std::string::npos)
      spec.flags += fmt[k++];
    if (k < fmt.size() && fmt[k] >= '0' && fmt[k] <= '9') spec.width = read_number(fmt, k);
    if (k < fmt.size() && fmt[k] == '.') spec.precision = read_number(fmt, ++k);
    if (k >= fmt.size()) fail("incomplete format");
    spec.type = fmt[k];
    if (spec.type == '%') {
      out += '%';
      continue;
    }
    if (!spec.key.empty()) {
      if (args.kind != Kind::kDict) fail("format requires a mapping");
      const Value* v = args.dict->find(spec.key);
      if (v == nullptr) fail("KeyError: " + string_repr(spec.key));
      out += format_one(spec, *v);
    } else {
      if (used >= positional.size()) fail("not enough arguments for format string");
      out += format_one(spec, positional[used++]);
    }
    e.charge_string(out.size());
  }
  if (used < positional.size() && tuple)
    fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace detinfer::jinja
