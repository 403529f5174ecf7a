#include <map>

#include "core/check.h"
#include "decode/json_pattern.h"
#include "decode/json_pattern_nfa.h"
#include "decode/json_schema_passes.h"

namespace detinfer::decode {

namespace {

using pattern_nfa::CharSet;
using pattern_nfa::Frag;
using pattern_nfa::NState;

using Bits = std::vector<std::uint64_t>;

void closure(const std::vector<NState>& nfa, Bits& set, std::vector<std::int32_t>& stack) {
  stack.clear();
  for (std::size_t w = 0; w < set.size(); ++w) {
    for (std::size_t b = 0; b < 64; ++b) {
      if ((set[w] >> b) & 1U) stack.push_back(static_cast<std::int32_t>(w * 64 + b));
    }
  }
  while (!stack.empty()) {
    const NState& n = nfa[stack.back()];
    stack.pop_back();
    for (const std::int32_t e : {n.e1, n.e2}) {
      if (e >= 0 && !((set[e / 64] >> (e % 64)) & 1U)) {
        set[e / 64] |= std::uint64_t{1} << (e % 64);
        stack.push_back(e);
      }
    }
  }
}

// Subset construction over the writable characters, at most kMaxPatternDfaStates.
void build_dfa(const std::vector<NState>& nfa, const Frag& f, PatternDfa& d,
               const std::string& where) {
  const CharSet chars = pattern_nfa::writable();
  std::map<Bits, std::int32_t> ids;
  std::vector<Bits> sets;
  std::vector<std::int32_t> stack, live;
  Bits start((nfa.size() + 63) / 64, 0);
  start[f.start / 64] |= std::uint64_t{1} << (f.start % 64);
  closure(nfa, start, stack);
  ids.emplace(start, 0);
  sets.push_back(start);
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const Bits cur = sets[i];  // a copy: sets grows below
    live.clear();
    for (std::size_t k = 0; k < nfa.size(); ++k) {
      if (((cur[k / 64] >> (k % 64)) & 1U) && nfa[k].on >= 0) live.push_back(k);
    }
    d.accept.push_back((cur[f.end / 64] >> (f.end % 64)) & 1U);
    d.next.resize(d.next.size() + 128, -1);
    for (int c = 0; c < 128; ++c) {
      if (!chars.test(c)) continue;
      Bits to(cur.size(), 0);
      bool any = false;
      for (const std::int32_t k : live) {
        if (nfa[k].set.test(c)) {
          to[nfa[k].on / 64] |= std::uint64_t{1} << (nfa[k].on % 64);
          any = true;
        }
      }
      if (!any) continue;
      closure(nfa, to, stack);
      auto it = ids.find(to);
      if (it == ids.end()) {
        if (sets.size() >= static_cast<std::size_t>(kMaxPatternDfaStates)) {
          schema_error(where, str_cat("'pattern' needs more than ", kMaxPatternDfaStates,
                                      " DFA states (too many ambiguous repetitions)"));
        }
        it = ids.emplace(to, static_cast<std::int32_t>(sets.size())).first;
        sets.push_back(to);
      }
      d.next[i * 128 + c] = static_cast<std::int16_t>(it->second);
    }
  }
  d.states = static_cast<std::int32_t>(sets.size());
}

// ok[state][count]: from here, some continuation ends the string validly (matching, and
// within minLength/maxLength). Counts fall from cap; the saturated count (no maxLength)
// is a plain reachability fixpoint.
void length_table(PatternDfa& d) {
  const std::size_t width = static_cast<std::size_t>(d.cap) + 1;
  d.ok.assign(static_cast<std::size_t>(d.states) * width, 0);
  const auto at = [&](std::int32_t s, std::int32_t n) -> std::uint8_t& {
    return d.ok[static_cast<std::size_t>(s) * width + n];
  };
  for (std::int32_t n = d.cap; n >= 0; --n) {
    const std::int32_t after = d.step_count(n);
    for (bool changed = true; changed;) {  // one pass unless the count saturates
      changed = false;
      for (std::int32_t s = 0; s < d.states; ++s) {
        if (at(s, n) != 0) continue;
        bool good = d.accept[s] != 0 && n >= d.min_length;
        for (int c = 0; c < 128 && !good && after >= 0; ++c) {
          const std::int16_t t = d.next[static_cast<std::size_t>(s) * 128 + c];
          good = t >= 0 && at(t, after) != 0;
        }
        if (good) {
          at(s, n) = 1;
          if (after == n) changed = true;
        }
      }
    }
  }
}

}  // namespace

PatternByte PatternDfa::step(PatternCursor& c, std::uint8_t byte) const {
  static const char kEscapes[] = "\"\\/bfnrt";       // after a backslash
  static const char kDecoded[] = "\"\\/\b\f\n\r\t";  // the characters they stand for
  const auto take = [&](std::uint8_t ch, bool apply) {
    const std::int16_t to = next[static_cast<std::size_t>(c.state) * 128 + ch];
    const std::int32_t n = step_count(c.count);
    if (to < 0 || n < 0 || !can_continue(to, n)) return false;
    if (apply) c = PatternCursor{to, n, false};
    return true;
  };
  if (c.escape) {
    for (int i = 0; i < 8; ++i) {
      if (byte == static_cast<std::uint8_t>(kEscapes[i])) {
        return take(static_cast<std::uint8_t>(kDecoded[i]), true) ? PatternByte::kTaken
                                                                  : PatternByte::kReject;
      }
    }
    return PatternByte::kReject;
  }
  if (byte == '"') return PatternByte::kClose;
  if (byte == '\\') {  // taken only if some escape can follow
    for (int i = 0; i < 8; ++i) {
      if (take(static_cast<std::uint8_t>(kDecoded[i]), false)) {
        c.escape = true;
        return PatternByte::kTaken;
      }
    }
    return PatternByte::kReject;
  }
  if (byte < 0x20 || byte >= 0x7F) return PatternByte::kReject;
  return take(byte, true) ? PatternByte::kTaken : PatternByte::kReject;
}

std::shared_ptr<const PatternDfa> compile_pattern(const std::string& pattern,
                                                  std::int32_t min_length, std::int32_t max_length,
                                                  const std::string& where) {
  if (pattern.size() > kMaxPatternBytes) {
    schema_error(where, str_cat("'pattern' is longer than ", kMaxPatternBytes, " bytes"));
  }
  const pattern_nfa::Nfa nfa = pattern_nfa::parse(pattern, where);
  auto d = std::make_shared<PatternDfa>();
  build_dfa(nfa.states, nfa.whole, *d, where);
  d->min_length = min_length;
  d->saturate = max_length == INT32_MAX;
  d->cap = d->saturate ? min_length : max_length;
  if (static_cast<std::int64_t>(d->states) * (d->cap + 1) > kMaxPatternLengthCells) {
    schema_error(where, str_cat("'pattern' with minLength/maxLength needs more than ",
                                kMaxPatternLengthCells, " automaton cells (lower the lengths)"));
  }
  length_table(*d);
  if (!d->can_continue(0, 0)) {
    schema_error(where,
                 "'pattern' admits no string of printable ASCII (and \\b \\t \\n "
                 "\\f \\r) within minLength/maxLength");
  }
  return d;
}

}  // namespace detinfer::decode
