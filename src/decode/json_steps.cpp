// The frame handlers of JsonState (json_automaton.h): what each kind of value does with
// one byte of output text.
#include "decode/json_automaton.h"

namespace detinfer::decode {

using namespace json_phase;  // NOLINT(build/namespaces)

namespace {

bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

bool same_prefix(const std::string& a, const std::string& b, std::size_t n) {
  return a.size() >= n && b.size() >= n && a.compare(0, n, b, 0, n) == 0;
}

// The first literal in [from, to] that extends the matched prefix of `cur` (pos bytes)
// by `c`, or -1. The first match is kept as the representative of all matches.
// `usable(p)` filters the candidates (keys whose value fits; literals: all).
template <typename Text, typename Usable>
std::int32_t next_candidate(const std::vector<Text>& lits, const std::string& (*text)(const Text&),
                            std::int32_t from, std::int32_t to, std::int32_t cur, std::size_t pos,
                            std::uint8_t c, Usable usable) {
  for (std::int32_t p = from; p <= to; ++p) {
    const std::string& s = text(lits[p]);
    if (s.size() > pos && static_cast<std::uint8_t>(s[pos]) == c &&
        same_prefix(s, text(lits[cur]), pos) && usable(p)) {
      return p;
    }
  }
  return -1;
}

const std::string& plain(const std::string& s) { return s; }
const std::string& key_of(const Property& p) { return p.key; }
bool every(std::int32_t) { return true; }

}  // namespace

bool JsonState::key_fits(const Node& n, std::int32_t from, std::int32_t room) const {
  const auto nprops = static_cast<std::int32_t>(n.props.size());
  const std::int32_t last = std::min<std::int32_t>(n.next_required[from], nprops - 1);
  for (std::int32_t p = from; p <= last; ++p) {
    if (g_->nodes[n.props[p].value].min_frames <= room) return true;
  }
  return false;
}

JsonState::Step JsonState::object_step(Frame& f, std::uint8_t c, std::int32_t room,
                                       std::int32_t& push) const {
  const Node& n = g_->nodes[f.node];
  const auto nprops = static_cast<std::int32_t>(n.props.size());
  const bool free_keys = n.props.empty() && n.additional >= 0;
  const bool can_close = free_keys || n.props.empty() || n.next_required[f.a] == nprops;
  switch (f.phase) {
    case kStart:
      if (c != '{') return Step::kReject;
      f.phase = kOKeyOrEnd;
      f.a = 0;
      return Step::kConsumed;
    case kOKeyOrEnd:
    case kOKeyNext:
    case kOKeyNextSp:
      if (f.phase == kOKeyOrEnd && c == '}') return can_close ? Step::kDone : Step::kReject;
      if (f.phase == kOKeyNext && c == ' ') {
        f.phase = kOKeyNextSp;
        return Step::kConsumed;
      }
      if (c != '"') return Step::kReject;
      if (free_keys) {
        if (g_->nodes[n.additional].min_frames > room) return Step::kReject;
        f.phase = kOColon;
        push = g_->key_string;
        return Step::kPushRefeed;
      }
      if (f.a >= nprops || !key_fits(n, f.a, room)) return Step::kReject;
      f.phase = kOKey;
      f.b = f.a;
      f.pos = 1;  // every key starts with its quote
      return Step::kConsumed;
    case kOKey:
      return key_step(f, c, room);
    case kOColon:
      if (c != ':') return Step::kReject;
      f.phase = kOAfterColon;
      return Step::kConsumed;
    case kOAfterColon:
    case kOValueNext:
      if (f.phase == kOAfterColon && c == ' ') {
        f.phase = kOValueNext;
        return Step::kConsumed;
      }
      f.phase = kOAfterValue;
      push = free_keys ? n.additional : n.props[f.a - 1].value;
      return Step::kPushRefeed;
    case kOAfterValue:
      if (c == ',' && (free_keys ? g_->nodes[n.additional].min_frames <= room
                                 : f.a < nprops && key_fits(n, f.a, room))) {
        f.phase = kOKeyNext;
        return Step::kConsumed;
      }
      if (c == '}' && can_close) return Step::kDone;
      return Step::kReject;
    default:
      return Step::kReject;
  }
}

JsonState::Step JsonState::key_step(Frame& f, std::uint8_t c, std::int32_t room) const {
  const Node& n = g_->nodes[f.node];
  const auto last =
      std::min<std::int32_t>(n.next_required[f.a], static_cast<std::int32_t>(n.props.size()) - 1);
  const auto fits = [&](std::int32_t q) { return g_->nodes[n.props[q].value].min_frames <= room; };
  const std::int32_t p = next_candidate<Property>(n.props, key_of, f.b, last, f.b, f.pos, c, fits);
  if (p < 0) return Step::kReject;
  f.b = p;
  ++f.pos;
  if (f.pos == n.props[p].key.size()) {  // keys are prefix-free: this one is complete
    f.a = p + 1;
    f.phase = kOColon;
  }
  return Step::kConsumed;
}

JsonState::Step JsonState::array_step(Frame& f, std::uint8_t c, std::int32_t room,
                                      std::int32_t& push) const {
  const Node& n = g_->nodes[f.node];
  const auto item = [&](std::int32_t i) {
    return i < static_cast<std::int32_t>(n.prefix.size()) ? n.prefix[i] : n.items;
  };
  // Item i may open (items below minItems always fit: the array's min_frames counts them).
  const auto fits = [&](std::int32_t i) {
    return i < n.max_items && g_->nodes[item(i)].min_frames <= room;
  };
  switch (f.phase) {
    case kStart:
      if (c != '[') return Step::kReject;
      f.phase = kAFirst;
      f.a = 0;
      return Step::kConsumed;
    case kAFirst:
      if (c == ']' && n.min_items == 0) return Step::kDone;
      if (!fits(0)) return Step::kReject;
      break;
    case kAAfterValue:
      if (c == ',' && fits(f.a)) {
        f.phase = kANext;
        return Step::kConsumed;
      }
      return c == ']' && f.a >= n.min_items ? Step::kDone : Step::kReject;
    case kANext:
      if (c == ' ') {
        f.phase = kANextSp;
        return Step::kConsumed;
      }
      break;
    case kANextSp:
      break;
    default:
      return Step::kReject;
  }
  push = item(f.a);
  ++f.a;
  f.phase = kAAfterValue;
  return Step::kPushRefeed;
}

JsonState::Step JsonState::string_step(Frame& f, std::uint8_t c) const {
  const Node& n = g_->nodes[f.node];
  switch (f.phase) {
    case kStart:
      if (c != '"') return Step::kReject;
      f.phase = kSBody;
      f.a = 0;  // characters so far
      f.b = 0;  // continuation bytes still expected
      return Step::kConsumed;
    case kSEsc:
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' &&
          c != 't') {
        return Step::kReject;  // \u escapes are not generated (docs/structured.md)
      }
      ++f.a;
      f.phase = kSBody;
      return Step::kConsumed;
    case kSBody:
      break;
    default:
      return Step::kReject;
  }
  if (f.b > 0) {  // inside a multi-byte character: pos holds the byte range [lo, hi]
    if (c < (f.pos >> 8) || c > (f.pos & 0xFF)) return Step::kReject;
    f.pos = 0x80BF;
    if (--f.b == 0) ++f.a;
    return Step::kConsumed;
  }
  if (c == '"') return f.a >= n.min_length ? Step::kDone : Step::kReject;
  if (f.a >= n.max_length || c < 0x20) return Step::kReject;
  if (c == '\\') {
    f.phase = kSEsc;
    return Step::kConsumed;
  }
  if (c < 0x80) {
    ++f.a;
    return Step::kConsumed;
  }
  // UTF-8 lead bytes: no overlong forms, no surrogates, nothing above U+10FFFF.
  if (c >= 0xC2 && c <= 0xDF) {
    f.b = 1;
    f.pos = 0x80BF;
  } else if (c >= 0xE0 && c <= 0xEF) {
    f.b = 2;
    f.pos = c == 0xE0 ? 0xA0BF : c == 0xED ? 0x809F : 0x80BF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    f.b = 3;
    f.pos = c == 0xF0 ? 0x90BF : c == 0xF4 ? 0x808F : 0x80BF;
  } else {
    return Step::kReject;
  }
  return Step::kConsumed;
}

// A pattern string: a = DFA state, b = characters counted (PatternDfa::step_count).
// Only ASCII is written; '"' and '\\' and the control characters \b \t \n \f \r
// through their short escapes. A '\\' is taken only if some escape can follow it.
JsonState::Step JsonState::pattern_step(Frame& f, std::uint8_t c) const {
  const PatternDfa& d = *g_->nodes[f.node].pattern;
  if (f.phase == kStart) {
    if (c != '"') return Step::kReject;
    f.phase = kPBody;
    f.a = 0;
    f.b = 0;
    return Step::kConsumed;
  }
  if (f.phase != kPBody && f.phase != kPEsc) return Step::kReject;
  PatternCursor cur{f.a, f.b, f.phase == kPEsc};
  switch (d.step(cur, c)) {
    case PatternByte::kClose:
      return d.can_close(cur) ? Step::kDone : Step::kReject;
    case PatternByte::kTaken:
      f.a = cur.state;
      f.b = cur.count;
      f.phase = cur.escape ? kPEsc : kPBody;
      return Step::kConsumed;
    case PatternByte::kReject:
      break;
  }
  return Step::kReject;
}

const PatternDfa* JsonState::pattern_top(PatternCursor& cursor) const {
  if (ends_.size() != 1 || ends_[0] == 0) return nullptr;
  const Frame& f = frames_[ends_[0] - 1];
  const Node& n = g_->nodes[f.node];
  if (n.kind != NodeKind::kPattern || (f.phase != kPBody && f.phase != kPEsc)) return nullptr;
  cursor = PatternCursor{f.a, f.b, f.phase == kPEsc};
  return n.pattern.get();
}

JsonState::Step JsonState::format_step(Frame& f, std::uint8_t c) const {
  const Node& n = g_->nodes[f.node];
  if (f.phase == kStart) {
    if (c != '"') return Step::kReject;
    f.phase = kFBody;
    f.a = 0;    // segment
    f.b = 0;    // bytes into the segment
    f.pos = 0;  // literal candidate
    return Step::kConsumed;
  }
  if (f.a == static_cast<std::int32_t>(n.format.size())) {
    return c == '"' ? Step::kDone : Step::kReject;
  }
  const FormatSegment& seg = n.format[f.a];
  if (seg.literals.empty()) {
    if (seg.chars.find(static_cast<char>(c)) == std::string::npos) return Step::kReject;
    if (++f.b == seg.count) {
      ++f.a;
      f.b = 0;
    }
    return Step::kConsumed;
  }
  const std::int32_t p = next_candidate<std::string>(
      seg.literals, plain, f.pos, static_cast<std::int32_t>(seg.literals.size()) - 1, f.pos,
      static_cast<std::size_t>(f.b), c, every);
  if (p < 0) return Step::kReject;
  f.pos = static_cast<std::uint16_t>(p);
  if (++f.b == static_cast<std::int32_t>(seg.literals[p].size())) {  // same-length literals
    ++f.a;
    f.b = 0;
    f.pos = 0;
  }
  return Step::kConsumed;
}

NumberPrefix JsonState::number_prefix(const Frame& f) {
  NumberPrefix p;
  p.negative = f.flag != 0;
  p.int_value = f.v;
  switch (f.phase) {
    case kNZero:
      p.int_digits = 1;
      break;
    case kNInt:
      p.int_digits = f.a;
      break;
    case kNDot:
    case kNFrac:
      p.int_digits = 1;
      p.dot = true;
      p.frac_value = f.b;
      p.frac_digits = f.phase == kNFrac ? f.a : 0;
      break;
    default:
      break;
  }
  return p;
}

JsonState::Step JsonState::number_step(Frame& f, std::uint8_t c) const {
  const Node& n = g_->nodes[f.node];
  const bool integer = n.kind == NodeKind::kInteger;
  const Step st = number_byte(f, c, integer);
  if (!n.bounds) return st;
  // A rejected byte kills the stack: the frame needs no restoring.
  if (st == Step::kPopRefeed) return inside(number_prefix(f), *n.bounds) ? st : Step::kReject;
  if (st == Step::kConsumed && !can_reach(number_prefix(f), integer, *n.bounds)) {
    return Step::kReject;
  }
  return st;
}

JsonState::Step JsonState::number_byte(Frame& f, std::uint8_t c, bool integer) {
  switch (f.phase) {
    case kStart:
    case kNMinus:
      if (f.phase == kStart && c == '-') {
        f.phase = kNMinus;
        f.flag = 1;
        return Step::kConsumed;
      }
      if (c == '0') {
        f.phase = kNZero;
        f.v = 0;
        return Step::kConsumed;
      }
      if (!is_digit(c)) return Step::kReject;
      f.phase = kNInt;
      f.a = 1;
      f.v = c - '0';
      return Step::kConsumed;
    case kNZero:
    case kNInt:
      if (f.phase == kNInt && is_digit(c) && f.a < kMaxIntDigits) {
        ++f.a;
        f.v = f.v * 10 + (c - '0');
        return Step::kConsumed;
      }
      if (c == '.' && !integer) {
        f.phase = kNDot;
        f.b = 0;
        return Step::kConsumed;
      }
      return Step::kPopRefeed;
    case kNDot:
      if (!is_digit(c)) return Step::kReject;
      f.phase = kNFrac;
      f.a = 1;
      f.b = c - '0';
      return Step::kConsumed;
    case kNFrac:
      if (is_digit(c) && f.a < kMaxFracDigits) {
        ++f.a;
        f.b = f.b * 10 + (c - '0');
        return Step::kConsumed;
      }
      return Step::kPopRefeed;
    default:
      return Step::kReject;
  }
}

JsonState::Step JsonState::literal_step(Frame& f, const std::vector<std::string>& lits,
                                        std::uint8_t c) const {
  // a: bytes matched; b: the first literal matching them; flag: a literal ends here.
  const auto last = static_cast<std::int32_t>(lits.size()) - 1;
  const std::int32_t p = next_candidate<std::string>(lits, plain, f.b, last, f.b,
                                                     static_cast<std::size_t>(f.a), c, every);
  if (p < 0) return f.flag != 0 ? Step::kPopRefeed : Step::kReject;
  f.b = p;
  ++f.a;
  const auto len = static_cast<std::size_t>(f.a);
  bool ends = false, longer = false;
  for (std::int32_t q = p; q <= last; ++q) {
    if (!same_prefix(lits[q], lits[p], len)) continue;
    ends = ends || lits[q].size() == len;
    longer = longer || lits[q].size() > len;
  }
  if (ends && !longer) return Step::kDone;
  f.flag = ends ? 1 : 0;
  return Step::kConsumed;
}

}  // namespace detinfer::decode
