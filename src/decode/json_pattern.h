// JSON Schema `pattern` for constrained decoding (docs/structured.md, "pattern"): a
// documented subset of ECMA-262 regular expressions compiled to a DFA over the ASCII
// characters a constrained string may contain, combined with minLength/maxLength. Every
// cost is bounded before work: the pattern's length, the NFA's states (repetitions are
// expanded), the DFA's states and the length table; a pattern beyond them, or with a
// feature outside the subset, is an Error naming `pattern`. No backtracking anywhere:
// compiling is linear in the automata's sizes and each generated character is one table
// lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace detinfer::decode {

constexpr std::size_t kMaxPatternBytes = 1024;
constexpr std::int32_t kMaxPatternNfaStates = 4096;
constexpr std::int32_t kMaxPatternDfaStates = 512;
constexpr std::int64_t kMaxPatternLengthCells = 1 << 18;  // DFA states x (length cap + 1)
// Totals over the distinct patterns of one schema (equal patterns are compiled once), so
// that many patterns cannot add up to unbounded memory or time.
constexpr std::int64_t kMaxSchemaPatternStates = 4096;
constexpr std::int64_t kMaxSchemaPatternCells = 1 << 20;

// A position inside a pattern string: DFA state, characters counted, and whether a
// backslash was just written (its escape character comes next).
struct PatternCursor {
  std::int32_t state = 0;
  std::int32_t count = 0;
  bool escape = false;
};

enum class PatternByte : std::uint8_t {
  kTaken,   // the byte continues the string (the cursor moved)
  kClose,   // an unescaped '"': the string ends here if can_close()
  kReject,  // not writable here, or no valid end would stay reachable
};

struct PatternDfa {
  std::int32_t states = 0;
  std::vector<std::int16_t> next;    // [state * 128 + character]: next state or -1
  std::vector<std::uint8_t> accept;  // per state
  // Length bookkeeping: characters are counted up to `cap` (minLength when there is no
  // maxLength: the count then saturates at cap; else maxLength: it may not pass cap).
  std::int32_t min_length = 0;
  std::int32_t cap = 0;
  bool saturate = true;
  std::vector<std::uint8_t> ok;  // [state * (cap + 1) + count]: a valid end is reachable

  // The count after one more character from `count`; -1 when maxLength forbids it.
  std::int32_t step_count(std::int32_t count) const {
    if (count < cap) return count + 1;
    return saturate ? cap : -1;
  }
  bool can_continue(std::int32_t state, std::int32_t count) const {
    return ok[static_cast<std::size_t>(state) * (cap + 1) + count] != 0;
  }
  bool can_close(const PatternCursor& c) const {
    return !c.escape && accept[c.state] != 0 && c.count >= min_length;
  }
  // One byte of JSON string text: printable ASCII, or a backslash and its short escape
  // (\" \\ \/ \b \f \n \r \t), taken only if a valid end stays reachable. The one
  // step of both the automaton (JsonState) and the token mask's pattern walk.
  PatternByte step(PatternCursor& c, std::uint8_t byte) const;
};

// Compiles `pattern` (search semantics, as JSON Schema: unanchored unless it starts with
// ^ / ends with $) with the string's length bounds. Throws Error(kInvalidArgument,
// "response_format") naming `pattern` and `where` when unsupported, too large, or when no
// string the automaton writes matches.
std::shared_ptr<const PatternDfa> compile_pattern(const std::string& pattern,
                                                  std::int32_t min_length, std::int32_t max_length,
                                                  const std::string& where);

}  // namespace detinfer::decode
