// Numeric bounds of constrained decoding (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum; docs/structured.md): exact decimals on the automaton's grid (at most
// kMaxIntDigits digits before the point, kMaxFracDigits after it) and the test whether a
// number's prefix can still be completed to a value inside the bounds, so that the
// automaton never starts a number it cannot finish.
#pragma once

#include <cstdint>
#include <optional>

namespace detinfer::decode {

// value = ip + fp / 10^9 with 0 <= fp < 10^9 (floor form: -1.5 is {-2, 500000000}).
struct Decimal {
  std::int64_t ip = 0;
  std::int32_t fp = 0;
  friend bool operator<(const Decimal& a, const Decimal& b) {
    return a.ip < b.ip || (a.ip == b.ip && a.fp < b.fp);
  }
  friend bool operator<=(const Decimal& a, const Decimal& b) { return !(b < a); }
};

// Inclusive bounds on the grid of the node's kind.
struct NumberBounds {
  Decimal lo, hi;
};

// The largest magnitude the automaton writes (integers: fp is 0).
Decimal max_magnitude(bool integer);

// Bounds from the schema's doubles (nullopt: keyword absent). Exclusive bounds become
// the next double inward; a number's bounds are then rounded inward to 9 decimals (a
// generated value v >= a decimal that parses to the bound parses to a double >= it, so
// any validator comparing doubles agrees). nullopt when no value of the grid fits.
std::optional<NumberBounds> number_bounds(bool integer, std::optional<double> minimum,
                                          std::optional<double> maximum,
                                          std::optional<double> exclusive_minimum,
                                          std::optional<double> exclusive_maximum);

// A number being written: sign, integer digits (value and count) and, after the point,
// the fraction digits (value and count; `dot` true once '.' is written).
struct NumberPrefix {
  bool negative = false;
  std::int64_t int_value = 0;
  std::int32_t int_digits = 0;
  bool dot = false;
  std::int32_t frac_value = 0;
  std::int32_t frac_digits = 0;
};

// Some completion of `p` (within the digit limits) lies inside `b`.
bool can_reach(const NumberPrefix& p, bool integer, const NumberBounds& b);
// `p` as a complete number (at least one digit, and one after a point) lies inside `b`.
bool inside(const NumberPrefix& p, const NumberBounds& b);

}  // namespace detinfer::decode
