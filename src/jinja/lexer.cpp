#include "jinja/lexer.h"

#include <cstdlib>

#include "core/utf8_append.h"
#include "detinfer/error.h"

namespace detinfer::jinja {

void syntax_error(std::string_view source, std::size_t offset, const std::string& what) {
  std::size_t line = 1;
  std::size_t col = 1;
  for (std::size_t k = 0; k < offset && k < source.size(); ++k) {
    if (source[k] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(source[k]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  throw Error(ErrorCode::kInvalidArgument,
              "chat template line " + std::to_string(line) + ", column " + std::to_string(col) +
                  ": " + what,
              "chat_template");
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

std::string normalize_newlines(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (in[k] == '\r') {
      out += '\n';
      if (k + 1 < in.size() && in[k + 1] == '\n') ++k;
    } else {
      out += in[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

using core::append_utf8;

class Lexer {
 public:
  explicit Lexer(std::string source) { result_.source = std::move(source); }

  LexResult run() {
    const std::string& s = src();
    while (pos_ < s.size()) {
      const std::size_t start = pos_;
      const std::size_t tag = find_tag(start);
      if (tag == std::string::npos) {
        emit_text(s.substr(start), start);
        break;
      }
      const char kind = s[tag + 1];
      std::size_t after = tag + 2;
      const char sign = after < s.size() && (s[after] == '-' || s[after] == '+') ? s[after] : 0;
      if (sign != 0) ++after;
      std::size_t raw_body = 0;
      const bool raw = kind == '%' && raw_begin(after, raw_body);
      std::string text = s.substr(start, tag - start);
      strip_left(text, sign, kind != '{', start);
      emit_text(std::move(text), start);
      if (raw) {
        lex_raw(raw_body);
      } else if (kind == '#') {
        lex_comment(after);
      } else {
        lex_tag(kind, tag, after);
      }
    }
    push(TokenType::kEof, "", src().size());
    return std::move(result_);
  }

 private:
  const std::string& src() const { return result_.source; }

  std::size_t find_tag(std::size_t from) const {
    const std::string& s = src();
    for (std::size_t k = s.find('{', from); k != std::string::npos; k = s.find('{', k + 1)) {
      if (k + 1 < s.size() && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  // lstrip_blocks and the `-` marker on the left of a tag.
  void strip_left(std::string& text, char sign, bool block_or_comment, std::size_t start) const {
    if (sign == '-') {
      std::size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      text.resize(end);
    } else if (sign != '+' && block_or_comment) {
      const std::size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      const bool line_starting = start == 0 || src()[start - 1] == '\n';
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        bool blank = true;
        for (std::size_t k = l_pos; k < text.size(); ++k) blank = blank && is_space(text[k]);
        if (blank) text.resize(l_pos);
      }
    }
  }

  void emit_text(std::string text, std::size_t offset) {
    if (!text.empty()) push(TokenType::kText, std::move(text), offset);
  }

  void push(TokenType type, std::string text, std::size_t offset) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.offset = offset;
    result_.tokens.push_back(std::move(t));
  }

  std::size_t skip_spaces(std::size_t k) const {
    while (k < src().size() && is_space(src()[k])) ++k;
    return k;
  }

  // After the closing `%}` of a block (or `#}`): `-` strips all whitespace, `+` nothing,
  // otherwise trim_blocks drops one newline.
  std::size_t after_close(std::size_t close, char marker, std::size_t close_len) const {
    std::size_t k = close + close_len;
    if (marker == '-') return skip_spaces(k);
    if (marker != '+' && k < src().size() && src()[k] == '\n') ++k;
    return k;
  }

  bool raw_begin(std::size_t after, std::size_t& body) const {
    const std::string& s = src();
    std::size_t k = skip_spaces(after);
    if (s.compare(k, 3, "raw") != 0) return false;
    k = skip_spaces(k + 3);
    if (s.compare(k, 3, "-%}") == 0) {
      body = skip_spaces(k + 3);
      return true;
    }
    if (s.compare(k, 2, "%}") == 0) {
      body = k + 2;
      return true;
    }
    return false;
  }

  void lex_raw(std::size_t body) {
    const std::string& s = src();
    for (std::size_t k = s.find("{%", body); k != std::string::npos; k = s.find("{%", k + 1)) {
      std::size_t j = k + 2;
      const char sign = j < s.size() && (s[j] == '-' || s[j] == '+') ? s[j] : 0;
      if (sign != 0) ++j;
      j = skip_spaces(j);
      if (s.compare(j, 6, "endraw") != 0) continue;
      j = skip_spaces(j + 6);
      char marker = 0;
      if (j < s.size() && (s[j] == '-' || s[j] == '+')) marker = s[j++];
      if (s.compare(j, 2, "%}") != 0) continue;
      std::string text = s.substr(body, k - body);
      strip_left(text, sign, true, body);
      emit_text(std::move(text), body);
      pos_ = after_close(j, marker, 2);
      return;
    }
    syntax_error(s, body, "Missing end of raw directive");
  }

  void lex_comment(std::size_t after) {
    const std::string& s = src();
    const std::size_t close = s.find("#}", after);
    if (close == std::string::npos) syntax_error(s, after, "Missing end of comment tag");
    char marker = 0;
    if (close > after && (s[close - 1] == '-' || s[close - 1] == '+')) marker = s[close - 1];
    pos_ = after_close(close, marker, 2);
  }

  void lex_tag(char kind, std::size_t tag, std::size_t after);
  bool lex_tag_end(char kind, std::size_t k);
  std::size_t lex_number(std::size_t k);
  std::size_t lex_string(std::size_t k);
  std::size_t lex_operator(std::size_t k, int& depth);

  LexResult result_;
  std::size_t pos_ = 0;
};

// Recognizes the end of the tag at k; sets pos_ past it.
bool Lexer::lex_tag_end(char kind, std::size_t k) {
  const std::string& s = src();
  const char* close = kind == '%' ? "%}" : "}}";
  const TokenType type = kind == '%' ? TokenType::kBlockEnd : TokenType::kVarEnd;
  char marker = 0;
  std::size_t at = k;
  if ((s[k] == '-' || (s[k] == '+' && kind == '%')) && s.compare(k + 1, 2, close) == 0) {
    marker = s[k];
    at = k + 1;
  } else if (s.compare(k, 2, close) != 0) {
    return false;
  }
  push(type, "", k);
  pos_ = kind == '%' ? after_close(at, marker, 2) : (marker == '-' ? skip_spaces(at + 2) : at + 2);
  return true;
}

void Lexer::lex_tag(char kind, std::size_t tag, std::size_t after) {
  const std::string& s = src();
  push(kind == '%' ? TokenType::kBlockBegin : TokenType::kVarBegin, "", tag);
  int depth = 0;  // open brackets: a closing `}}` inside them is two braces
  std::size_t k = after;
  while (true) {
    k = skip_spaces(k);
    if (k >= s.size()) {
      syntax_error(s, k,
                   kind == '%' ? "unexpected end of template, expected 'end of statement block'"
                               : "unexpected end of template, expected 'end of print statement'");
    }
    if (depth == 0 && lex_tag_end(kind, k)) return;
    const char c = s[k];
    if (is_digit(c)) {
      k = lex_number(k);
    } else if (is_name_start(c)) {
      std::size_t j = k + 1;
      while (j < s.size() && (is_name_start(s[j]) || is_digit(s[j]))) ++j;
      push(TokenType::kName, s.substr(k, j - k), k);
      k = j;
    } else if (c == '\'' || c == '"') {
      k = lex_string(k);
    } else {
      k = lex_operator(k, depth);
    }
  }
}

std::size_t Lexer::lex_number(std::size_t k) {
  const std::string& s = src();
  const std::size_t start = k;
  auto digits = [&](std::size_t j) {
    while (j < s.size() &&
           (is_digit(s[j]) || (s[j] == '_' && j + 1 < s.size() && is_digit(s[j + 1]))))
      ++j;
    return j;
  };
  k = digits(k);
  bool is_float = false;
  if (k + 1 < s.size() && s[k] == '.' && is_digit(s[k + 1])) {
    is_float = true;
    k = digits(k + 1);
  }
  if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
    std::size_t j = k + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && is_digit(s[j])) {
      is_float = true;
      k = digits(j);
    }
  }
  std::string text;
  for (std::size_t j = start; j < k; ++j) {
    if (s[j] != '_') text += s[j];
  }
  Token t;
  t.offset = start;
  if (is_float) {
    t.type = TokenType::kFloat;
    t.float_value = std::strtod(text.c_str(), nullptr);
  } else {
    t.type = TokenType::kInt;
    errno = 0;
    t.int_value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) syntax_error(s, start, "integer literal too large");
  }
  t.text = std::move(text);
  result_.tokens.push_back(std::move(t));
  return k;
}

// Decodes the escape whose letter is at s[j] into value (Python's string escapes);
// advances j past the escape's last character.
void decode_escape(const std::string& s, std::size_t& j, std::string& value) {
  auto hex = [&](int n) {
    std::uint32_t cp = 0;
    for (int h = 0; h < n; ++h) {
      const char d = j + 1 < s.size() ? s[j + 1] : 0;
      const int v = is_digit(d)              ? d - '0'
                    : (d >= 'a' && d <= 'f') ? d - 'a' + 10
                    : (d >= 'A' && d <= 'F') ? d - 'A' + 10
                                             : -1;
      if (v < 0) syntax_error(s, j, "truncated \\x, \\u or \\U escape in a string literal");
      cp = cp * 16 + static_cast<std::uint32_t>(v);
      ++j;
    }
    if (cp > 0x10FFFF) syntax_error(s, j, "illegal Unicode character in a string literal");
    append_utf8(value, cp);
  };
  // Pairs of (escape letter, character).
  static const std::string_view kSimple = "n\nt\tr\ra\ab\bf\fv\v\\\\''\"\"";
  const char e = s[j];
  for (std::size_t k = 0; k + 1 < kSimple.size(); k += 2) {
    if (kSimple[k] == e) {
      value += kSimple[k + 1];
      return;
    }
  }
  if (e == '\n') return;  // line continuation
  if (e == 'x' || e == 'u' || e == 'U') {
    hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
    return;
  }
  if (e >= '0' && e <= '7') {
    std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
    for (int n = 0; n < 2 && j + 1 < s.size() && s[j + 1] >= '0' && s[j + 1] <= '7'; ++n) {
      cp = cp * 8 + static_cast<std::uint32_t>(s[++j] - '0');
    }
    append_utf8(value, cp);
    return;
  }
  value += '\\';  // unknown escapes stay as written
  value += e;
}

std::size_t Lexer::lex_string(std::size_t k) {
  const std::string& s = src();
  const char quote = s[k];
  std::string value;
  std::size_t j = k + 1;
  for (; j < s.size() && s[j] != quote; ++j) {
    if (s[j] != '\\') {
      value += s[j];
    } else if (++j < s.size()) {
      decode_escape(s, j, value);
    }
  }
  if (j >= s.size()) syntax_error(s, k, "unexpected end of string literal");
  push(TokenType::kString, std::move(value), k);
  return j + 1;
}

std::size_t Lexer::lex_operator(std::size_t k, int& depth) {
  const std::string& s = src();
  static const char* const kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
  for (const char* op : kTwo) {
    if (s.compare(k, 2, op) == 0) {
      push(TokenType::kOperator, op, k);
      return k + 2;
    }
  }
  const char c = s[k];
  if (std::string_view("+-*/%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
    syntax_error(s, k, std::string("unexpected char '") + c + "'");
  }
  if (c == '(' || c == '[' || c == '{') ++depth;
  if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  push(TokenType::kOperator, std::string(1, c), k);
  return k + 1;
}

}  // namespace

LexResult lex(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace detinfer::jinja
