// The parser of `pattern` (json_pattern_nfa.h): recursive descent building a Thompson NFA.
#include "decode/json_pattern.h"

#include <cctype>

#include "core/check.h"
#include "decode/json_pattern_nfa.h"
#include "decode/json_schema_passes.h"

namespace detinfer::decode::pattern_nfa {

namespace {

// Recursive descent over the subset (docs/structured.md) building a Thompson NFA.
// Recursion follows group nesting, at most kMaxGroupDepth.
class Parser {
 public:
  Parser(const std::string& p, const std::string& where) : p_(p), where_(where) {}
  std::vector<NState> nfa;
  Frag whole();

 private:
  static constexpr int kMaxGroupDepth = 32;
  static constexpr int kMaxRepeat = 1000;
  const std::string& p_;
  const std::string& where_;
  std::size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    schema_error(where_, str_cat("'pattern' ", nlohmann::json(p_).dump(), ": ", what,
                                 " (at offset ", pos_, ")"));
  }
  bool more() const { return pos_ < p_.size(); }
  char peek() const { return p_[pos_]; }
  std::int32_t state() {
    if (nfa.size() >= static_cast<std::size_t>(kMaxPatternNfaStates)) {
      fail(str_cat("needs more than ", kMaxPatternNfaStates,
                   " automaton states (repetitions are expanded)"));
    }
    nfa.emplace_back();
    return static_cast<std::int32_t>(nfa.size() - 1);
  }
  void link(std::int32_t from, std::int32_t to) {
    (nfa[from].e1 < 0 ? nfa[from].e1 : nfa[from].e2) = to;
  }
  Frag empty() {
    const std::int32_t s = state();
    return {s, s};
  }
  Frag chars(const CharSet& set) {
    const std::int32_t s = state(), e = state();
    nfa[s].set = set;
    nfa[s].on = e;
    return {s, e};
  }
  Frag concat(Frag a, Frag b) {
    link(a.end, b.start);
    return {a.start, b.end};
  }
  Frag either(Frag a, Frag b) {
    const std::int32_t s = state(), e = state();
    link(s, a.start);
    link(s, b.start);
    link(a.end, e);
    link(b.end, e);
    return {s, e};
  }
  Frag optional(Frag a) { return either(a, empty()); }
  Frag star(Frag a) {
    const std::int32_t s = state(), e = state();
    link(s, a.start);
    link(s, e);
    link(a.end, a.start);
    link(a.end, e);
    return {s, e};
  }
  Frag alternation(int depth);
  Frag sequence(int depth, bool top);
  Frag atom(int depth);
  Frag single(int depth);
  bool quantifier(int& lo, int& hi);
  int number();
  CharSet class_body();
  CharSet escape(bool in_class);
};

Frag Parser::whole() {
  Frag f = alternation(0);
  if (more()) fail("unbalanced ')'");
  return f;
}

Frag Parser::alternation(int depth) {
  Frag f = sequence(depth, depth == 0);
  while (more() && peek() == '|') {
    ++pos_;
    f = either(f, sequence(depth, depth == 0));
  }
  return f;
}

// At the top level a sequence may start with ^ and end with $; otherwise it matches
// anywhere in the string (JSON Schema's patterns are not anchored).
Frag Parser::sequence(int depth, bool top) {
  bool anchored_start = false, anchored_end = false;
  if (top && more() && peek() == '^') {
    anchored_start = true;
    ++pos_;
  }
  Frag f = empty();
  while (more() && peek() != '|' && peek() != ')') {
    if (top && peek() == '$' && (pos_ + 1 == p_.size() || p_[pos_ + 1] == '|')) {
      anchored_end = true;
      ++pos_;
      break;
    }
    f = concat(f, atom(depth));
  }
  const CharSet any = range(0, 127);
  if (top && !anchored_start) f = concat(star(chars(any)), f);
  if (top && !anchored_end) f = concat(f, star(chars(any)));
  return f;
}

int Parser::number() {
  int v = 0;
  const std::size_t begin = pos_;
  while (more() && peek() >= '0' && peek() <= '9') {
    v = v * 10 + (peek() - '0');
    if (v > kMaxRepeat) fail(str_cat("a repetition count above ", kMaxRepeat));
    ++pos_;
  }
  if (pos_ == begin) fail("'{' that is not a quantifier {n}, {n,} or {n,m}");
  return v;
}

// Reads a quantifier at pos_ (and a lazy '?', which matches the same strings).
bool Parser::quantifier(int& lo, int& hi) {
  if (!more()) return false;
  const char q = peek();
  if (q == '*' || q == '+' || q == '?') {
    lo = q == '+' ? 1 : 0;
    hi = q == '?' ? 1 : -1;
    ++pos_;
  } else if (q == '{') {
    ++pos_;
    lo = number();
    hi = lo;
    if (more() && peek() == ',') {
      ++pos_;
      hi = more() && peek() == '}' ? -1 : number();
    }
    if (!more() || peek() != '}') fail("'{' that is not a quantifier {n}, {n,} or {n,m}");
    ++pos_;
    if (hi >= 0 && hi < lo) fail("a repetition {n,m} with m < n");
  } else {
    return false;
  }
  if (more() && peek() == '?') ++pos_;
  if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
    fail("a quantifier after a quantifier");
  }
  return true;
}

// One atom and its quantifier. A repeated atom is parsed again for every copy (the NFA
// state limit bounds the expansion).
Frag Parser::atom(int depth) {
  const std::size_t begin = pos_;
  Frag f = single(depth);
  int lo = 1, hi = 1;
  if (!quantifier(lo, hi)) return f;
  const std::size_t after = pos_;
  bool used = false;
  const auto copy = [&]() {
    if (!used) {
      used = true;
      return f;
    }
    pos_ = begin;
    Frag c = single(depth);
    return c;
  };
  Frag out = empty();
  for (int i = 0; i < lo; ++i) out = concat(out, copy());
  if (hi < 0) {
    out = concat(out, star(copy()));
  } else {
    for (int i = lo; i < hi; ++i) out = concat(out, optional(copy()));
  }
  pos_ = after;
  return out;
}

Frag Parser::single(int depth) {
  const char c = peek();
  if (c == '(') {
    ++pos_;
    if (more() && peek() == '?') {
      if (pos_ + 1 >= p_.size() || p_[pos_ + 1] != ':') {
        fail("lookaround assertions and named groups are not supported");
      }
      pos_ += 2;
    }
    if (depth + 1 > kMaxGroupDepth) fail(str_cat("groups nested deeper than ", kMaxGroupDepth));
    Frag f = alternation(depth + 1);
    if (!more() || peek() != ')') fail("an unclosed '('");
    ++pos_;
    return f;
  }
  ++pos_;
  switch (c) {
    case '[':
      return chars(class_body());
    case '.': {
      CharSet s = range(0, 127);
      s.reset('\n');
      s.reset('\r');
      return chars(s);
    }
    case '\\':
      return chars(escape(false));
    case '^':
    case '$':
      --pos_;
      fail(
          "'^' and '$' are supported only at the start and end of the pattern or of a "
          "top-level alternative");
    case '*':
    case '+':
    case '?':
    case '{':
      --pos_;
      fail("a quantifier with nothing to repeat");
    default:
      if (static_cast<unsigned char>(c) >= 0x80) --pos_, fail("non-ASCII characters");
      CharSet s;
      s.set(static_cast<unsigned char>(c));
      return chars(s);
  }
}

CharSet Parser::escape(bool in_class) {
  if (!more()) fail("a trailing '\\'");
  const char c = p_[pos_++];
  CharSet s;
  const auto hex = [&](int digits) {
    int v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = more() ? p_[pos_] : 'g';
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) fail("a malformed \\x or \\u escape");
      v = v * 16 + d;
      ++pos_;
    }
    if (v >= 0x80) fail("non-ASCII characters");
    return v;
  };
  switch (c) {
    case 'd':
    case 'D':
      s = range('0', '9');
      return c == 'd' ? s : ~s;
    case 'w':
    case 'W':
      s = range('0', '9') | range('A', 'Z') | range('a', 'z');
      s.set('_');
      return c == 'w' ? s : ~s;
    case 's':
    case 'S':
      s = range(9, 13);
      s.set(' ');
      return c == 's' ? s : ~s;
    case 'n':
      return s.set('\n');
    case 't':
      return s.set('\t');
    case 'r':
      return s.set('\r');
    case 'f':
      return s.set('\f');
    case 'v':
      return s.set('\v');
    case 'x':
      return s.set(hex(2));
    case 'u':
      return s.set(hex(4));
    case 'b':
      if (in_class) return s.set('\b');
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c))) {
        return s.set(static_cast<unsigned char>(c));  // escaped punctuation
      }
  }
  --pos_;
  fail(str_cat("the escape \\", std::string(1, c),
               " is not supported (word boundaries, back-references, \\p, \\c, \\0)"));
}

CharSet Parser::class_body() {
  const bool negate = more() && peek() == '^';
  if (negate) ++pos_;
  if (more() && peek() == ']') fail("an empty class or a ']' first in a class (escape it)");
  CharSet s;
  // One class member: a character (code >= 0) or a set such as \d (code -1).
  const auto member = [&](CharSet& set) {
    if (!more()) fail("an unclosed '['");
    const char c = p_[pos_++];
    if (c == '\\') {
      set = escape(true);
      return set.count() == 1 ? first_of(set) : -1;
    }
    if (static_cast<unsigned char>(c) >= 0x80) --pos_, fail("non-ASCII characters");
    set.reset();
    set.set(static_cast<unsigned char>(c));
    return static_cast<int>(static_cast<unsigned char>(c));
  };
  while (true) {
    if (!more()) fail("an unclosed '['");
    if (peek() == ']') break;
    CharSet one;
    const int lo = member(one);
    if (more() && peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
      ++pos_;
      CharSet other;
      const int hi = member(other);
      if (lo < 0 || hi < 0) fail("a range with a class escape such as \\d at an end");
      if (hi < lo) fail("a range out of order");
      one = range(lo, hi);
    }
    s |= one;
  }
  ++pos_;
  return negate ? ~s : s;
}

}  // namespace

Nfa parse(const std::string& pattern, const std::string& where) {
  Parser parser(pattern, where);
  Nfa out;
  out.whole = parser.whole();
  out.states = std::move(parser.nfa);
  return out;
}

}  // namespace detinfer::decode::pattern_nfa
