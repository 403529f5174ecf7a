// The RoPE table's transcendental functions without the C library (docs/numerics.md,
// "RoPE tables"): a fixed sequence of IEEE-754 double additions, subtractions,
// multiplications and divisions (double-double arithmetic, products split exactly by
// Veltkamp/Dekker, no fma, no libm call), so the table is the same on every C library,
// compiler and host. Each function returns its exact value rounded to the nearest double
// except when the exact value lies within about 2^-90 (relative) of a rounding boundary.
#pragma once

namespace detinfer::model::rope_math {

// base^e for base in [1, 2^64) and e in [0, 1].
double pow(double base, double e);

// ln(x) for x in [2^-60, 2^60], to double (yarn and longrope's scaling terms).
double log(double x);

// sin(x) and cos(x) for x in [0, 2^40], to double (the slow, accurate path).
void sincos(double x, double* sin_x, double* cos_x);

// The same values rounded on to float, which is what a RoPE table stores: a fast double
// evaluation (error below 2^-50 relative) is used when every value within 2^-40 of it
// rounds to the same float; otherwise (about 1 argument in 30000) sincos() decides. The
// result always equals float(sincos(x)).
void sincos_f(double x, float* sin_x, float* cos_x);

}  // namespace detinfer::model::rope_math
