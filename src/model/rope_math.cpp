#include "model/rope_math.h"

#include <cstdint>

#include "core/check.h"

namespace detinfer::model::rope_math {
namespace {

// An unevaluated sum hi + lo with |lo| <= ulp(hi) / 2 (double-double).
struct DD {
  double hi;
  double lo;
};

// Exact sum (Knuth's TwoSum): s + e == a + b.
DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

// Exact sum when |a| >= |b| (or a == 0).
DD fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}

// Veltkamp split: a == hi + lo, each with at most 26 significant bits.
DD split(double a) {
  const double c = 134217729.0 * a;  // 2^27 + 1
  const double hi = c - (c - a);
  return {hi, a - hi};
}

// Exact product (Dekker): p + e == a * b, without fma.
DD two_prod(double a, double b) {
  const double p = a * b;
  const DD as = split(a), bs = split(b);
  return {p, ((as.hi * bs.hi - p) + as.hi * bs.lo + as.lo * bs.hi) + as.lo * bs.lo};
}

DD add(DD x, DD y) {
  DD s = two_sum(x.hi, y.hi);
  const DD t = two_sum(x.lo, y.lo);
  s = fast_two_sum(s.hi, s.lo + t.hi);
  return fast_two_sum(s.hi, s.lo + t.lo);
}

DD add(DD x, double y) {
  const DD s = two_sum(x.hi, y);
  return fast_two_sum(s.hi, s.lo + x.lo);
}

DD mul(DD x, DD y) {
  const DD p = two_prod(x.hi, y.hi);
  return fast_two_sum(p.hi, p.lo + (x.hi * y.lo + x.lo * y.hi));
}

DD mul(DD x, double y) {
  const DD p = two_prod(x.hi, y);
  return fast_two_sum(p.hi, p.lo + x.lo * y);
}

DD div(DD x, DD y) {
  const double q1 = x.hi / y.hi;
  DD r = add(x, mul(y, -q1));
  const double q2 = r.hi / y.hi;
  r = add(r, mul(y, -q2));
  const double q3 = r.hi / y.hi;
  return add(fast_two_sum(q1, q2), q3);
}

DD neg(DD x) { return {-x.hi, -x.lo}; }

// Nearest integer, ties to even, for |t| < 2^51 (exact: the add rounds to an integer).
double round_to_int(double t) {
  const double magic = 6755399441055744.0;  // 1.5 * 2^52
  return t >= 0 ? (t + magic) - magic : (t - magic) + magic;
}

// 1/n! for n = 0..kTerms-1, each from the previous by one double-double division by n.
constexpr int kTerms = 32;
const DD* inverse_factorials() {
  static const struct Table {
    DD v[kTerms];
    Table() {
      v[0] = {1.0, 0.0};
      for (int n = 1; n < kTerms; ++n) v[n] = div(v[n - 1], DD{static_cast<double>(n), 0.0});
    }
  } table;
  return table.v;
}

// ln 2 and pi/2 to 159 bits, as sums of three doubles (each the nearest double to what the
// previous ones leave).
constexpr double kLn2[3] = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56, 0x1.7b57a079a1934p-111};
constexpr double kPio2[3] = {0x1.921fb54442d18p+0, 0x1.1a62633145c07p-54, -0x1.f1976b7ed8fbcp-110};
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;

// ln(b) for b in [2^-64, 2^64): b = m * 2^k with m in [sqrt(1/2), sqrt(2)), then
// ln(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1), |s| < 0.172,
// 22 terms (the next is below 2^-110 of the sum).
DD log_dd(double b) {
  int k = 0;
  double m = b;
  while (m >= 1.4142135623730951) {  // sqrt(2) rounded; exact halvings
    m *= 0.5;
    ++k;
  }
  while (m < 0.7071067811865476) {  // sqrt(1/2) rounded; exact doublings
    m *= 2.0;
    --k;
  }
  const DD s = div(DD{m - 1.0, 0.0}, two_sum(m, 1.0));  // m - 1 is exact (Sterbenz)
  const DD z = mul(s, s);
  constexpr int kOdd = 22;
  DD acc = div(DD{1.0, 0.0}, DD{2.0 * kOdd - 1.0, 0.0});
  for (int j = kOdd - 2; j >= 0; --j) {
    acc = add(mul(acc, z), div(DD{1.0, 0.0}, DD{2.0 * j + 1.0, 0.0}));
  }
  const DD ln_m = mul(mul(acc, s), 2.0);
  const double kd = static_cast<double>(k);
  DD ln_2k = two_prod(kd, kLn2[0]);
  ln_2k = add(ln_2k, two_prod(kd, kLn2[1]));
  ln_2k = add(ln_2k, kd * kLn2[2]);
  return add(ln_2k, ln_m);
}

// exp(y) for y in [0, 45]: y = k ln2 + r with |r| <= 0.35 (a little more when k is off by
// one), exp(r) = sum of r^n / n! for n < 32 by Horner, times 2^k (exact doublings).
DD exp_dd(DD y) {
  const double k = round_to_int(y.hi / kLn2[0]);
  DD r = add(y, neg(two_prod(k, kLn2[0])));
  r = add(r, neg(two_prod(k, kLn2[1])));
  r = add(r, -k * kLn2[2]);
  const DD* f = inverse_factorials();
  DD acc = f[kTerms - 1];
  for (int n = kTerms - 2; n >= 0; --n) acc = add(mul(acc, r), f[n]);
  const double two = k >= 0 ? 2.0 : 0.5;
  for (double i = k >= 0 ? k : -k; i > 0; i -= 1.0) acc = {acc.hi * two, acc.lo * two};
  return acc;
}

// sum over i of (-1)^i z^i / (2i + first)!, i = 0..14 (first = 1: sin(r)/r; 0: cos(r)),
// for z = r^2 <= 0.65: the next term is below 2^-110.
DD even_series(DD z, int first) {
  const DD* f = inverse_factorials();
  constexpr int kCount = 15;
  auto coeff = [&](int i) {
    const DD c = f[2 * i + first];
    return i % 2 == 0 ? c : neg(c);
  };
  DD acc = coeff(kCount - 1);
  for (int i = kCount - 2; i >= 0; --i) acc = add(mul(acc, z), coeff(i));
  return acc;
}

DD reduce(double x, double* k_out) {
  // x = k pi/2 + r, |r| <= pi/4 (a little more when k is off by one). k pi/2 is taken to
  // 159 bits; x - k*kPio2[0] is exact (Sterbenz), the rest is double-double.
  const double k = round_to_int(x * kTwoOverPi);
  const DD p0 = two_prod(k, kPio2[0]);
  DD r = add(DD{x - p0.hi, 0.0}, -p0.lo);
  r = add(r, neg(two_prod(k, kPio2[1])));
  *k_out = k;
  return add(r, -k * kPio2[2]);
}

// Whether every value within 2^-40 (relative) of y rounds to the same float as y.
bool settled(double y) {
  const double d = (y < 0 ? -y : y) * 0x1p-40;
  return static_cast<float>(y - d) == static_cast<float>(y + d);
}

void place(double k, double sr, double cr, double* sin_x, double* cos_x) {
  switch (static_cast<std::int64_t>(k) & 3) {
    case 0:
      *sin_x = sr;
      *cos_x = cr;
      return;
    case 1:
      *sin_x = cr;
      *cos_x = -sr;
      return;
    case 2:
      *sin_x = -sr;
      *cos_x = -cr;
      return;
    default:
      *sin_x = -cr;
      *cos_x = sr;
      return;
  }
}

}  // namespace

double pow(double base, double e) {
  DETINFER_INTERNAL_CHECK(base >= 1.0 && base < 18446744073709551616.0 && e >= 0.0 && e <= 1.0);
  if (e == 0.0 || base == 1.0) return 1.0;
  const DD v = exp_dd(mul(log_dd(base), e));
  return v.hi + v.lo;  // v is normalized: this is v.hi, the nearest double to v
}

double log(double x) {
  DETINFER_INTERNAL_CHECK(x >= 0x1p-60 && x <= 0x1p60);
  if (x == 1.0) return 0.0;
  const DD v = log_dd(x);
  return v.hi + v.lo;
}

void sincos(double x, double* sin_x, double* cos_x) {
  DETINFER_INTERNAL_CHECK(x >= 0.0 && x <= 1099511627776.0);  // [0, 2^40]
  double k = 0;
  const DD r = reduce(x, &k);
  const DD z = mul(r, r);
  const DD s = mul(even_series(z, 1), r);
  const DD c = even_series(z, 0);
  place(k, s.hi + s.lo, c.hi + c.lo, sin_x, cos_x);
}

void sincos_f(double x, float* sin_x, float* cos_x) {
  DETINFER_INTERNAL_CHECK(x >= 0.0 && x <= 1099511627776.0);
  double k = 0;
  const DD r = reduce(x, &k);
  // Double evaluation on the double-double r: sin r = r + r z S(z), cos r = 1 - z/2 +
  // z^2 C(z) - r.hi r.lo, S and C the Taylor tails to 1/19! and 1/20! (below 2^-60 after).
  const DD* f = inverse_factorials();
  const double z = r.hi * r.hi;
  double ps = -f[19].hi, pc = f[20].hi;
  for (int n = 17; n >= 3; n -= 2) ps = (n % 4 == 1 ? f[n].hi : -f[n].hi) + z * ps;
  for (int n = 18; n >= 4; n -= 2) pc = (n % 4 == 0 ? f[n].hi : -f[n].hi) + z * pc;
  const double s = r.hi + (r.lo + r.hi * (z * ps));
  const double w = 0.5 * z, h = 1.0 - w;
  const double c = h + (((1.0 - h) - w) + (z * (z * pc) - r.hi * r.lo));
  double ss = 0, cc = 0;
  place(k, s, c, &ss, &cc);
  if (settled(ss) && settled(cc)) {
    *sin_x = static_cast<float>(ss);
    *cos_x = static_cast<float>(cc);
    return;
  }
  sincos(x, &ss, &cc);
  *sin_x = static_cast<float>(ss);
  *cos_x = static_cast<float>(cc);
}

}  // namespace detinfer::model::rope_math
