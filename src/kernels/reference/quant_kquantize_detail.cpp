// Helpers of the ggml reference quantizers (reference/quant_kquantize_detail.h).
#include "kernels/reference/quant_kquantize_detail.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"

namespace detinfer::kernels::ref::kquant {
namespace {

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The index and signed value of the largest |x[i]| (the first on ties), as ggml scans.
float signed_absmax(int n, const float* x, float* amax) {
  float max = 0.0f;
  *amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Levels clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1) and the x^2-weighted sums
// sumlx = sum ((x*x) * x) * l and suml2 = sum ((x*x) * l) * l, accumulated in order.
void symmetric_levels(int n, int nmax, const float* x, float iscale, int* l, float* sumlx,
                      float* suml2) {
  *sumlx = 0.0f;
  *suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    l[i] = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    const float lf = static_cast<float>(l[i]);
    const float wx = w * x[i];
    *sumlx += wx * lf;
    const float wl = w * lf;
    *suml2 += wl * lf;
  }
}

// One coordinate-descent pass of make_q3_quants (step 3 of its doc); returns the number
// of levels changed.
int q3_refine_pass(int n, int nmax, const float* x, int* l, float* sumlx, float* suml2) {
  int changed = 0;
  for (int i = 0; i < n; ++i) {
    const float w = x[i] * x[i];
    const float wx = w * x[i];
    const float li = static_cast<float>(l[i]);
    float slx = *sumlx - wx * li;
    if (!(slx > 0.0f)) continue;
    const float wli = w * li;
    float sl2 = *suml2 - wli * li;
    const float t = x[i] * sl2;
    const int nl = clamp_int(nearest_int(t / slx), -nmax, nmax - 1);
    if (nl == l[i]) continue;
    const float nlf = static_cast<float>(nl);
    slx += wx * nlf;
    const float wnl = w * nlf;
    sl2 += wnl * nlf;
    const float lhs = (slx * slx) * *suml2;
    const float rhs = (*sumlx * *sumlx) * sl2;
    if (sl2 > 0.0f && lhs > rhs) {
      l[i] = nl;
      *sumlx = slx;
      *suml2 = sl2;
      ++changed;
    }
  }
  return changed;
}

// The weighted error sum_i w[i] * e(scale * L[i] + min - x[i]), e = |.| or square.
float weighted_error(int n, const float* x, const float* w, const std::uint8_t* L, float scale,
                     float min, bool use_mad) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float sl = scale * static_cast<float>(L[i]);
    const float diff = (sl + min) - x[i];
    const float e = use_mad ? std::fabs(diff) : diff * diff;
    err += w[i] * e;
  }
  return err;
}

}  // namespace

int nearest_int(float v) {
  const float s = v + 12582912.0f;
  std::int32_t bits;
  std::memcpy(&bits, &s, sizeof(bits));
  return (bits & 0x007FFFFF) - 0x00400000;
}

std::int32_t trunc_i32_x86(float v) {
  // [-2^31, 2^31): -2147483904.0f is the binary32 just below -2^31.
  if (!(v > -2147483904.0f && v < 2147483648.0f)) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(v);
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* w, std::uint8_t* L,
                       float* the_min, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  const float fmax = static_cast<float>(nmax);
  float iscale = fmax / (max - min);
  float scale = 1.0f / iscale;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<std::uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
  }
  float best = weighted_error(n, x, w, L, scale, min, use_mad);
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  std::uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    const float step = rdelta * static_cast<float>(is);
    // ggml uses the current min here: after an accepted refit, min is the refit's min.
    iscale = ((rmin + step) + fmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<std::uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float d = sum_w * sum_l2 - sum_l * sum_l;
    if (!(d > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    const float err = weighted_error(n, x, w, aux, this_scale, this_min, use_mad);
    if (err < best) {
      for (int i = 0; i < n; ++i) L[i] = aux[i];
      best = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L) {
  float amax;
  const float max = signed_absmax(n, x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  int l[16];
  float sumlx, suml2;
  symmetric_levels(n, nmax, x, iscale, l, &sumlx, &suml2);
  for (int pass = 0; pass < 5; ++pass) {
    if (q3_refine_pass(n, nmax, x, l, &sumlx, &suml2) == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(l[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L) {
  float amax;
  const float max = signed_absmax(n, x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fmax = static_cast<float>(nmax);
  int l[16];
  float sumlx, suml2;
  symmetric_levels(n, nmax, x, static_cast<float>(-nmax) / max, l, &sumlx, &suml2);
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(l[i] + nmax);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float step = 0.1f * static_cast<float>(is);
    const float iscale = -(fmax + step) / max;
    symmetric_levels(n, nmax, x, iscale, l, &sumlx, &suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(l[i] + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

bool store_f16(float v, std::uint8_t* p) {
  const std::uint16_t h = f32_to_f16_rne(v);
  p[0] = static_cast<std::uint8_t>(h & 0xFFu);
  p[1] = static_cast<std::uint8_t>(h >> 8);
  return (h & 0x7C00u) != 0x7C00u;
}

float load_f16(const std::uint8_t* p) {
  return f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

void unpack_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t* sc, std::uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void pack_scale_min_k4(const std::uint8_t* ls, const std::uint8_t* lm, std::uint8_t* q) {
  // Sub-blocks 0..3: bytes 0..3 (scale) and 4..7 (min), low 6 bits. Sub-blocks 4..7:
  // byte j + 4 = scale low nibble | min low nibble << 4; the high 2 bits of the scale go to
  // bits 6..7 of byte j - 4, those of the min to bits 6..7 of byte j.
  for (int j = 0; j < 4; ++j) {
    q[j] = ls[j];
    q[j + 4] = lm[j];
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = static_cast<std::uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
    q[j - 4] = static_cast<std::uint8_t>(q[j - 4] | ((ls[j] >> 4) << 6));
    q[j] = static_cast<std::uint8_t>(q[j] | ((lm[j] >> 4) << 6));
  }
}

void pack_q3k_scales(const std::uint8_t* l6, std::uint8_t* q) {
  // Low nibbles: scale j < 8 in byte j (bits 0..3), j >= 8 in byte j - 8 (bits 4..7).
  // High 2 bits: byte 8 + j % 4, bits 2 * (j / 4) .. +1.
  std::memset(q, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int l = l6[j];
    if (j < 8) {
      q[j] = static_cast<std::uint8_t>(l & 0xF);
    } else {
      q[j - 8] = static_cast<std::uint8_t>(q[j - 8] | ((l & 0xF) << 4));
    }
    q[8 + j % 4] = static_cast<std::uint8_t>(q[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
  }
}

int unpack_q3k_scale(int j, const std::uint8_t* q) {
  const int lo = j < 8 ? (q[j] & 0xF) : (q[j - 8] >> 4);
  const int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace detinfer::kernels::ref::kquant
