// The Mistral and pythonic tool-call parsers (docs/tools.md, "Which syntax a model
// speaks"): Mistral's `[TOOL_CALLS]name[ARGS]{..}` and `[TOOL_CALLS] [{..}]` forms, and
// Llama 3.2 / 4's pythonic `[f(a=1)]` list, whose keyword values are Python literals read
// here into JSON.
#include <charconv>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "chat/tool_calls_scan.h"
#include "core/utf8_append.h"

namespace detinfer::chat::detail {

namespace {

constexpr std::string_view kPythonStart = "<|python_start|>";
constexpr std::string_view kPythonEnd = "<|python_end|>";
constexpr std::size_t kMaxCallText = 1u << 20;  // as one JSON call (tool_calls.cpp)
constexpr int kMaxDepth = 64;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::size_t name_end(std::string_view s, std::size_t i) {
  while (i < s.size() && is_name_char(s[i])) ++i;
  return i;
}

bool starts_at(std::string_view s, std::size_t i, std::string_view what) {
  return s.substr(i, what.size()) == what;
}

// One `name[CALL_ID]id[ARGS]{..}` at s[i] (the tags optional; whitespace only after
// [ARGS]); the call and one past it.
std::optional<std::pair<ParsedToolCall, std::size_t>> named_call(std::string_view s,
                                                                 std::size_t i) {
  const std::size_t ne = name_end(s, i);
  if (ne == i) return std::nullopt;
  ParsedToolCall call;
  call.name = std::string(s.substr(i, ne - i));
  i = ne;
  if (starts_at(s, i, kMistralCallIdTag)) {
    i += kMistralCallIdTag.size();
    while (i < s.size() && s[i] != '[' && s[i] != '{') ++i;
  }
  if (starts_at(s, i, kMistralArgsTag)) i = skip_space(s, i + kMistralArgsTag.size());
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  const std::size_t end = json_end(s, i);
  if (end == std::string_view::npos) return std::nullopt;
  const auto j = parse(s.substr(i, end - i));
  if (!j || !j->is_object()) return std::nullopt;
  call.arguments = j->dump();
  return std::make_pair(std::move(call), end);
}

// The calls of a JSON array of call objects, or of one call object; nullopt unless every
// element is a call.
std::optional<std::vector<ParsedToolCall>> calls_of(const Json& j) {
  std::vector<ParsedToolCall> calls;
  if (j.is_object()) {
    auto c = call_from(j);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    return calls;
  }
  if (!j.is_array() || j.empty()) return std::nullopt;
  for (const Json& e : j) {
    auto c = call_from(e);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
  }
  return calls;
}

// The older form: a JSON array of call objects (or one object) at s[body]; the calls and
// one past the JSON.
std::optional<std::pair<std::vector<ParsedToolCall>, std::size_t>> json_calls(std::string_view s,
                                                                              std::size_t body) {
  if (body >= s.size() || (s[body] != '[' && s[body] != '{')) return std::nullopt;
  const std::size_t end = json_end(s, body);
  if (end == std::string_view::npos) return std::nullopt;
  const auto j = parse(s.substr(body, end - body));
  auto calls = j ? calls_of(*j) : std::nullopt;
  if (!calls) return std::nullopt;
  return std::make_pair(std::move(*calls), end);
}

// `name{..}` calls from s[i], each optionally after [TOOL_CALLS] (tagged: the first one
// must be); the calls and one past the last.
std::pair<std::vector<ParsedToolCall>, std::size_t> named_calls(std::string_view s, std::size_t i,
                                                                bool tagged) {
  std::vector<ParsedToolCall> calls;
  std::size_t at = i;
  while (true) {
    std::size_t k = skip_space(s, at);
    const bool tag = starts_at(s, k, kMistralTag);
    if (tagged && calls.empty() && !tag) break;
    if (tag) k += kMistralTag.size();
    auto c = named_call(s, k);
    if (!c) break;
    calls.push_back(std::move(c->first));
    at = c->second;
  }
  return {std::move(calls), at};
}

}  // namespace

ParsedMessage parse_mistral(std::string_view text) {
  ParsedMessage whole{content_of(std::string(text)), {}};
  const std::size_t tag = text.find(kMistralTag);
  if (tag == std::string_view::npos) {  // decoded without special tokens: all calls or none
    const std::size_t body = skip_space(text, 0);
    auto legacy = json_calls(text, body);
    if (legacy && body < text.size() && text[body] == '[' &&
        skip_space(text, legacy->second) == text.size()) {
      return {std::nullopt, std::move(legacy->first)};
    }
    auto named = named_calls(text, body, false);
    if (named.first.empty() || skip_space(text, named.second) != text.size()) return whole;
    return {std::nullopt, std::move(named.first)};
  }
  std::vector<ParsedToolCall> calls;
  std::size_t end = 0;
  if (auto legacy = json_calls(text, skip_space(text, tag + kMistralTag.size()))) {
    calls = std::move(legacy->first);
    end = legacy->second;
  } else {
    auto named = named_calls(text, tag, true);
    calls = std::move(named.first);
    end = named.second;
  }
  if (calls.empty()) return whole;
  ParsedMessage out;
  out.calls = std::move(calls);
  out.content = content_of(std::string(text.substr(0, tag)) + std::string(text.substr(end)));
  return out;
}

namespace {

// Python literals (str, int, float, True/False/None, list, tuple, dict with str keys) as
// JSON. Not read (the call is then content): other literals (bytes, sets, complex, inf,
// nan), raw or triple-quoted strings, expressions, ints beyond 64 bits, nesting deeper than
// kMaxDepth, invalid UTF-8 and duplicate dict keys.
class PyLiteral {
 public:
  PyLiteral(std::string_view s, std::size_t i) : s_(s), i_(i) {}
  std::size_t pos() const { return i_; }
  void skip() { i_ = skip_space(s_, i_); }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string name() {
    skip();
    const std::size_t b = i_;
    while (i_ < s_.size() && is_name_char(s_[i_]) && s_[i_] != '-') ++i_;
    const std::string n(s_.substr(b, i_ - b));
    const bool ok = !n.empty() && !(n[0] >= '0' && n[0] <= '9') && n[0] != '.';
    return ok ? n : std::string();
  }
  std::optional<Json> value(int depth) {
    skip();
    if (i_ >= s_.size() || depth > kMaxDepth) return std::nullopt;
    const char c = s_[i_];
    if (c == '"' || c == '\'') return string();
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(depth);
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return number();
    const std::string word = name();
    if (word == "True") return Json(true);
    if (word == "False") return Json(false);
    if (word == "None") return Json(nullptr);
    return std::nullopt;
  }

 private:
  std::optional<Json> sequence(char close, int depth) {
    ++i_;
    Json out = Json::array();
    while (!eat(close)) {
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
      if (!eat(',') && (skip(), i_ >= s_.size() || s_[i_] != close)) return std::nullopt;
    }
    return out;
  }
  std::optional<Json> dict(int depth) {
    ++i_;
    Json out = Json::object();
    while (!eat('}')) {
      auto k = value(depth + 1);
      if (!k || !k->is_string() || out.contains(k->get<std::string>()) || !eat(':')) {
        return std::nullopt;
      }
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out[k->get<std::string>()] = std::move(*v);
      if (!eat(',') && (skip(), i_ >= s_.size() || s_[i_] != '}')) return std::nullopt;
    }
    return out;
  }
  std::optional<Json> number() {
    std::size_t e = i_;
    if (s_[e] == '+' || s_[e] == '-') ++e;
    bool is_float = false;
    while (e < s_.size()) {
      const char c = s_[e];
      if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
      } else if ((c == '+' || c == '-') && (s_[e - 1] == 'e' || s_[e - 1] == 'E')) {
      } else if (c < '0' || c > '9') {
        break;
      }
      ++e;
    }
    std::string lit(s_.substr(i_, e - i_));
    if (!lit.empty() && lit[0] == '+') lit.erase(0, 1);
    const char* b = lit.data();
    const char* end = b + lit.size();
    Json out;
    if (is_float) {
      double d = 0;
      const auto r = std::from_chars(b, end, d);
      if (r.ec != std::errc() || r.ptr != end || !(d - d == 0)) return std::nullopt;
      out = d;
    } else {
      std::int64_t v = 0;
      const auto r = std::from_chars(b, end, v);
      if (r.ec != std::errc() || r.ptr != end) return std::nullopt;
      out = v;
    }
    i_ = e;
    return out;
  }

  // \xHH, \uHHHH or \UHHHHHHHH after the backslash and letter; false when malformed or a
  // surrogate / beyond U+10FFFF.
  bool hex_escape(std::size_t digits, std::string& out) {
    if (i_ + digits > s_.size()) return false;
    std::uint32_t cp = 0;
    const auto r = std::from_chars(s_.data() + i_, s_.data() + i_ + digits, cp, 16);
    if (r.ec != std::errc() || r.ptr != s_.data() + i_ + digits) return false;
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    core::append_utf8(out, cp);
    i_ += digits;
    return true;
  }
  std::optional<Json> string() {
    const char quote = s_[i_++];
    if (starts_at(s_, i_, std::string(2, quote))) return std::nullopt;  // '' or '''
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      const char c = s_[i_++];
      if (c == '\n') return std::nullopt;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      const char e = s_[i_++];
      const bool octal_next = i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '7';
      if (std::string_view("avN1234567").find(e) != std::string_view::npos ||
          (e == '0' && octal_next)) {
        return std::nullopt;  // escapes outside the subset: not a call
      }
      static constexpr std::string_view kFrom = "nrtbf0\\'\"";
      static constexpr std::string_view kTo = "\n\r\t\b\f\0\\'\"";
      const std::size_t k = kFrom.find(e);
      if (k != std::string_view::npos) {
        out += kTo[k];
      } else if (e == 'x' || e == 'u' || e == 'U') {
        if (!hex_escape(e == 'x' ? 2 : e == 'u' ? 4 : 8, out)) return std::nullopt;
      } else {  // Python keeps an unknown escape as written
        out += '\\';
        out += e;
      }
    }
    if (i_ >= s_.size()) return std::nullopt;
    ++i_;
    return Json(std::move(out));
  }

  std::string_view s_;
  std::size_t i_;
};

// One `name(k=v, ...)`; nullopt for positional arguments or repeated keywords.
std::optional<ParsedToolCall> python_call(PyLiteral& r) {
  ParsedToolCall call;
  call.name = r.name();
  if (call.name.empty() || !r.eat('(')) return std::nullopt;
  Json args = Json::object();
  bool closed = r.eat(')');
  while (!closed) {
    const std::string key = r.name();
    if (key.empty() || args.contains(key) || !r.eat('=')) return std::nullopt;
    auto v = r.value(1);
    if (!v) return std::nullopt;
    args[key] = std::move(*v);
    closed = r.eat(')');
    if (!closed && !r.eat(',')) return std::nullopt;
    if (!closed) closed = r.eat(')');  // a trailing comma
  }
  call.arguments = args.dump();
  return call;
}

}  // namespace

ParsedMessage parse_pythonic(std::string_view text) {
  if (text.size() > kMaxCallText) return {content_of(std::string(text)), {}};
  std::size_t i = skip_space(text, 0);
  if (starts_at(text, i, kPythonStart)) i += kPythonStart.size();
  PyLiteral r(text, i);
  std::vector<ParsedToolCall> calls;
  if (r.eat('[')) {
    try {
      bool closed = false;
      while (!closed) {
        auto c = python_call(r);
        if (!c) return parse_llama3(text);
        calls.push_back(std::move(*c));
        closed = r.eat(']');
        if (!closed && !r.eat(',')) return parse_llama3(text);
        if (!closed) closed = r.eat(']');  // a trailing comma
      }
    } catch (const std::exception&) {  // invalid UTF-8 met by Json::dump
      return parse_llama3(text);
    }
    std::size_t end = skip_space(text, r.pos());
    if (starts_at(text, end, kPythonEnd)) end = skip_space(text, end + kPythonEnd.size());
    if (!calls.empty() && end == text.size()) return {std::nullopt, std::move(calls)};
  }
  return parse_llama3(text);
}

}  // namespace detinfer::chat::detail
