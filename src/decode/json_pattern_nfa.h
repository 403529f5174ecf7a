// Internal to json_pattern*.cpp: the Thompson NFA a `pattern` parses to.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace detinfer::decode::pattern_nfa {

using CharSet = std::bitset<128>;

// The characters a constrained string may hold: printable ASCII, and the control
// characters with a short JSON escape (\b \t \n \f \r).
inline CharSet writable() {
  CharSet s;
  for (int c = 0x20; c < 0x7F; ++c) s.set(c);
  for (const int c : {8, 9, 10, 12, 13}) s.set(c);
  return s;
}

inline int first_of(const CharSet& s) {
  for (int c = 0; c < 128; ++c) {
    if (s.test(c)) return c;
  }
  return -1;
}

inline CharSet range(int lo, int hi) {
  CharSet s;
  for (int c = lo; c <= hi; ++c) s.set(c);
  return s;
}

struct NState {
  CharSet set;           // the characters of the edge to `on`
  std::int32_t on = -1;  // -1: no character edge
  std::int32_t e1 = -1, e2 = -1;
};

struct Frag {
  std::int32_t start, end;  // `end` has no edge yet
};

struct Nfa {
  std::vector<NState> states;
  Frag whole{0, 0};
};

// Parses the subset of docs/structured.md; throws the schema error naming `pattern`.
Nfa parse(const std::string& pattern, const std::string& where);

}  // namespace detinfer::decode::pattern_nfa
