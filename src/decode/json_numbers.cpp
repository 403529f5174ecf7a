#include "decode/json_numbers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "decode/json_schema.h"

namespace detinfer::decode {

namespace {

constexpr std::int64_t kTen9 = 1000000000;

std::int64_t pow10(std::int32_t n) {
  std::int64_t v = 1;
  for (std::int32_t i = 0; i < n; ++i) v *= 10;
  return v;
}

Decimal negate(const Decimal& d) {
  return d.fp == 0 ? Decimal{-d.ip, 0}
                   : Decimal{-d.ip - 1, static_cast<std::int32_t>(kTen9 - d.fp)};
}

// x (0 <= x < 1e15) rounded up or down to 9 decimals, exactly: from its shortest
// round-trip decimal text, which parses back to x.
Decimal magnitude_on_grid(double x, bool up) {
  char buf[512];
  const auto r = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed);
  Decimal d;
  const char* p = buf;
  for (; p < r.ptr && *p != '.'; ++p) d.ip = d.ip * 10 + (*p - '0');
  bool rest = false;
  std::int32_t digits = 0;
  if (p < r.ptr) ++p;  // the point
  for (; p < r.ptr; ++p) {
    if (digits < 9) {
      d.fp = d.fp * 10 + (*p - '0');
      ++digits;
    } else {
      rest = rest || *p != '0';
    }
  }
  for (; digits < 9; ++digits) d.fp *= 10;
  if (rest && up && ++d.fp == kTen9) {
    d.fp = 0;
    ++d.ip;
  }
  return d;
}

Decimal on_grid(double x, bool up) {  // signbit: -0.0 prints as "-0"
  return std::signbit(x) ? negate(magnitude_on_grid(-x, !up)) : magnitude_on_grid(x, up);
}

// The magnitudes [a, b] taken with the prefix's sign meet the bounds.
bool hits(const Decimal& a, const Decimal& b, bool negative, const NumberBounds& bounds) {
  if (negative) return negate(b) <= bounds.hi && bounds.lo <= negate(a);
  return a <= bounds.hi && bounds.lo <= b;
}

}  // namespace

Decimal max_magnitude(bool integer) {
  return {pow10(kMaxIntDigits) - 1, integer ? 0 : static_cast<std::int32_t>(kTen9 - 1)};
}

std::optional<NumberBounds> number_bounds(bool integer, std::optional<double> minimum,
                                          std::optional<double> maximum,
                                          std::optional<double> exclusive_minimum,
                                          std::optional<double> exclusive_maximum) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double lo = minimum.value_or(-kInf);
  double hi = maximum.value_or(kInf);
  if (exclusive_minimum) lo = std::max(lo, std::nextafter(*exclusive_minimum, kInf));
  if (exclusive_maximum) hi = std::min(hi, std::nextafter(*exclusive_maximum, -kInf));
  const Decimal top = max_magnitude(integer);
  NumberBounds b{negate(top), top};
  constexpr double kLimit = 1e15;  // above every magnitude the automaton writes
  if (std::isnan(lo) || std::isnan(hi) || lo >= kLimit || hi <= -kLimit) return std::nullopt;
  if (lo > -kLimit)
    b.lo = integer ? Decimal{static_cast<std::int64_t>(std::ceil(lo)), 0} : on_grid(lo, true);
  if (hi < kLimit) {
    b.hi = integer ? Decimal{static_cast<std::int64_t>(std::floor(hi)), 0} : on_grid(hi, false);
  }
  b.lo = std::max(b.lo, negate(top));
  b.hi = std::min(b.hi, top);
  if (b.hi < b.lo) return std::nullopt;
  return b;
}

bool can_reach(const NumberPrefix& p, bool integer, const NumberBounds& b) {
  const std::int32_t top_fp = integer ? 0 : static_cast<std::int32_t>(kTen9 - 1);
  if (p.int_digits == 0) return hits({0, 0}, max_magnitude(integer), p.negative, b);
  if (p.dot) {  // [I.F, I.F + 10^-m - 10^-9]
    const std::int64_t scale = pow10(9 - p.frac_digits);
    const std::int64_t f0 = p.frac_value * scale;
    return hits({p.int_value, static_cast<std::int32_t>(f0)},
                {p.int_value, static_cast<std::int32_t>(f0 + scale - 1)}, p.negative, b);
  }
  if (p.int_value == 0) return hits({0, 0}, {0, top_fp}, p.negative, b);  // "0" takes no digit
  // j more digits: [I * 10^j, (I + 1) * 10^j - 1] (and fractions after the last one)
  std::int64_t lo = p.int_value, hi = p.int_value;
  for (std::int32_t j = 0; p.int_digits + j <= kMaxIntDigits; ++j) {
    if (hits({lo, 0}, {hi, top_fp}, p.negative, b)) return true;
    lo *= 10;
    hi = hi * 10 + 9;
  }
  return false;
}

bool inside(const NumberPrefix& p, const NumberBounds& b) {
  Decimal v{p.int_value, static_cast<std::int32_t>(p.frac_value * pow10(9 - p.frac_digits))};
  if (p.negative) v = negate(v);
  return b.lo <= v && v <= b.hi;
}

}  // namespace detinfer::decode
