// ggml's reference quantizers for q4_1, q5_1 and the K formats (reference/quant_kquantize.h).
#include "kernels/reference/quant_kquantize.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/reference/quant_kquantize_detail.h"

namespace detinfer::kernels::ref {
namespace {

using kquant::load_f16;
using kquant::nearest_int;
using kquant::store_f16;

bool all_finite(const float* x, int n) {
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// q4_1 (levels 15) and q5_1 (levels 31): d, m, and the 32 truncated levels as the uint8
// values ggml's casts produce. False when fp16(d) or fp16(min) overflows.
bool quantize_affine32(const float* x, int levels, std::uint8_t* out, std::uint8_t* q) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int i = 0; i < kQk1Values; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
  }
  const float d = (max - min) / static_cast<float>(levels);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  if (!store_f16(d, out) || !store_f16(min, out + 2)) return false;
  for (int i = 0; i < kQk1Values; ++i) {
    const float t = (x[i] - min) * id;
    const std::int32_t v = kquant::trunc_i32_x86(t + 0.5f);
    const auto low = static_cast<std::uint8_t>(static_cast<std::uint32_t>(v) & 0xFFu);
    if (levels == 15) {
      // MIN(15, (int8_t)v) stored as uint8: the low byte read as signed, capped at 15.
      const int s = low < 128 ? low : low - 256;
      q[i] = static_cast<std::uint8_t>(s < 15 ? s : 15);
    } else {
      q[i] = low;
    }
  }
  return true;
}

// The 2-bit packing shared by q2_K and q3_K: qs[32n + l] = L[128n + l] | L[+32] << 2 |
// L[+64] << 4 | L[+96] << 6 (L in [0, 3]).
void pack_2bit(const std::uint8_t* L, std::uint8_t* qs) {
  for (int n = 0; n < 2; ++n) {
    const std::uint8_t* b = L + 128 * n;
    for (int l = 0; l < 32; ++l) {
      qs[32 * n + l] =
          static_cast<std::uint8_t>(b[l] | (b[l + 32] << 2) | (b[l + 64] << 4) | (b[l + 96] << 6));
    }
  }
}

// The scales and mins of the 8 sub-blocks of 32 of q4_K (nmax 15) / q5_K (nmax 31), with
// their make_qkx2_quants levels in L. False when one is not finite.
bool kx_subblocks(const float* x, int nmax, float rmin, int nstep, std::uint8_t* L, float* scales,
                  float* mins) {
  float w[32];
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xj[l]);
    scales[j] =
        kquant::make_qkx2_quants(32, nmax, xj, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    if (!std::isfinite(scales[j]) || !std::isfinite(mins[j])) return false;
  }
  return true;
}

// q4_K / q5_K: the 6-bit scales and mins, d and dmin (bytes 0..15 of both layouts), and the
// final levels L in [0, nmax]. False on a non-finite scale or a binary16 overflow.
bool quantize_kx(const float* x, int nmax, float rmin, int nstep, std::uint8_t* head,
                 std::uint8_t* L) {
  float scales[8], mins[8];
  if (!kx_subblocks(x, nmax, rmin, nstep, L, scales, mins)) return false;
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // ggml: uint8_t ls = nearest_int(...) (modulo 256), then MIN(63, ls).
    const auto s = static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]) & 0xFF);
    const auto m = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]) & 0xFF);
    ls[j] = s < 63 ? s : 63;
    lm[j] = m < 63 ? m : 63;
  }
  std::uint8_t* packed = head + 4;
  kquant::pack_scale_min_k4(ls, lm, packed);
  if (!store_f16(max_scale / 63.0f, head) || !store_f16(max_min / 63.0f, head + 2)) {
    return false;
  }
  const float d = load_f16(head), dmin = load_f16(head + 2);
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc, m;
    kquant::unpack_scale_min_k4(j, packed, &sc, &m);
    const float dj = d * static_cast<float>(sc);
    if (dj == 0.0f) continue;  // keep make_qkx2_quants' levels
    const float mj = dmin * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const float t = x[32 * j + i] + mj;
      L[32 * j + i] = static_cast<std::uint8_t>(clamp_int(nearest_int(t / dj), 0, nmax));
    }
  }
  return true;
}

// q2_K's 16 sub-block scales and mins (make_qkx2_quants with |x| weights, mean absolute
// error) and their levels; false when one is not finite.
bool q2k_subblocks(const float* x, std::uint8_t* L, float* scales, float* mins) {
  float w[16];
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
    scales[j] =
        kquant::make_qkx2_quants(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
    if (!std::isfinite(scales[j]) || !std::isfinite(mins[j])) return false;
  }
  return true;
}

}  // namespace

bool quantize_q4_1_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kQk1Values)) return false;
  std::uint8_t q[kQk1Values];
  if (!quantize_affine32(x, 15, out, q)) return false;
  for (int j = 0; j < 16; ++j) out[4 + j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
  return true;
}

bool quantize_q5_1_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kQk1Values)) return false;
  std::uint8_t q[kQk1Values];
  if (!quantize_affine32(x, 31, out, q)) return false;
  std::uint32_t qh = 0;
  for (int j = 0; j < kQk1Values; ++j) qh |= static_cast<std::uint32_t>((q[j] >> 4) & 1u) << j;
  for (int k = 0; k < 4; ++k) out[4 + k] = static_cast<std::uint8_t>(qh >> (8 * k));
  for (int j = 0; j < 16; ++j) {
    out[8 + j] = static_cast<std::uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
  }
  return true;
}

bool quantize_q2_k_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kSuperValues)) return false;
  std::uint8_t L[kSuperValues];
  float scales[16], mins[16];
  if (!q2k_subblocks(x, L, scales, mins)) return false;
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 16; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  std::uint8_t* sc = out;
  std::uint8_t* dh = out + 80;
  bool ok = true;
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
    ok = store_f16(max_scale / 15.0f, dh);
  } else {
    std::memset(sc, 0, 16);
    ok = store_f16(0.0f, dh);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) {
      const auto l = static_cast<unsigned>(nearest_int(iscale * mins[j]));
      sc[j] = static_cast<std::uint8_t>(sc[j] | (l << 4));
    }
    ok = store_f16(max_min / 15.0f, dh + 2) && ok;
  } else {
    ok = store_f16(0.0f, dh + 2) && ok;
  }
  if (!ok) return false;
  const float d = load_f16(dh), dmin = load_f16(dh + 2);
  for (int j = 0; j < 16; ++j) {
    const float dj = d * static_cast<float>(sc[j] & 0xF);
    if (dj == 0.0f) continue;  // keep make_qkx2_quants' levels
    const float mj = dmin * static_cast<float>(sc[j] >> 4);
    for (int i = 0; i < 16; ++i) {
      const float t = x[16 * j + i] + mj;
      L[16 * j + i] = static_cast<std::uint8_t>(clamp_int(nearest_int(t / dj), 0, 3));
    }
  }
  pack_2bit(L, out + 16);
  return true;
}

bool quantize_q3_k_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kSuperValues)) return false;
  std::int8_t L8[kSuperValues];
  float scales[16];
  float max_scale = 0.0f, amax = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = kquant::make_q3_quants(16, 4, x + 16 * j, L8 + 16 * j);
    if (!std::isfinite(scales[j])) return false;
    const float a = std::fabs(scales[j]);
    if (a > amax) {
      amax = a;
      max_scale = scales[j];
    }
  }
  std::uint8_t* hmask = out;
  std::uint8_t* qs = out + 32;
  std::uint8_t* packed = out + 96;
  std::uint8_t* dh = out + 108;
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    std::uint8_t l6[16];
    for (int j = 0; j < 16; ++j) {
      // ggml: int8_t l = nearest_int(...) (modulo 256), clamped to [-32, 31], + 32.
      const auto l = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
      l6[j] = static_cast<std::uint8_t>(clamp_int(l, -32, 31) + 32);
    }
    kquant::pack_q3k_scales(l6, packed);
    if (!store_f16(1.0f / iscale, dh)) return false;
  } else {
    std::memset(packed, 0, 12);
    store_f16(0.0f, dh);
  }
  const float d = load_f16(dh);
  std::uint8_t L[kSuperValues];
  for (int e = 0; e < kSuperValues; ++e) L[e] = static_cast<std::uint8_t>(L8[e]);
  for (int j = 0; j < 16; ++j) {
    const float dj = d * static_cast<float>(kquant::unpack_q3k_scale(j, packed));
    if (dj == 0.0f) continue;  // keep make_q3_quants' levels
    for (int i = 0; i < 16; ++i) {
      const int l = clamp_int(nearest_int(x[16 * j + i] / dj), -4, 3);
      L[16 * j + i] = static_cast<std::uint8_t>(l + 4);
    }
  }
  // The high bit of L[e] goes to bit e / 32 of hmask[e % 32]; qs keeps the low 2 bits.
  std::memset(hmask, 0, 32);
  for (int e = 0; e < kSuperValues; ++e) {
    if (L[e] > 3) {
      hmask[e % 32] = static_cast<std::uint8_t>(hmask[e % 32] | (1u << (e / 32)));
      L[e] = static_cast<std::uint8_t>(L[e] - 4);
    }
  }
  pack_2bit(L, qs);
  return true;
}

bool quantize_q4_k_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kSuperValues)) return false;
  std::uint8_t L[kSuperValues];
  if (!quantize_kx(x, 15, -1.0f, 20, out, L)) return false;
  std::uint8_t* qs = out + 16;
  for (int k = 0; k < 4; ++k) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * k + l] = static_cast<std::uint8_t>(L[64 * k + l] | (L[64 * k + 32 + l] << 4));
    }
  }
  return true;
}

bool quantize_q5_k_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kSuperValues)) return false;
  std::uint8_t L[kSuperValues];
  if (!quantize_kx(x, 31, -0.5f, 15, out, L)) return false;
  std::uint8_t* qh = out + 16;
  std::uint8_t* qs = out + 48;
  std::memset(qh, 0, 32);
  for (int k = 0; k < 4; ++k) {
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * k + l], hi = L[64 * k + 32 + l];
      qh[l] =
          static_cast<std::uint8_t>(qh[l] | ((lo >> 4) << (2 * k)) | ((hi >> 4) << (2 * k + 1)));
      qs[32 * k + l] = static_cast<std::uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    }
  }
  return true;
}

bool quantize_q6_k_block(const float* x, std::uint8_t* out) {
  if (!all_finite(x, kSuperValues)) return false;
  std::int8_t L8[kSuperValues];
  float scales[16];
  float max_scale = 0.0f, max_abs = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = kquant::make_qx_quants(16, 32, x + 16 * j, L8 + 16 * j);
    if (!std::isfinite(scales[j])) return false;
    const float a = std::fabs(scales[j]);
    if (a > max_abs) {
      max_abs = a;
      max_scale = scales[j];
    }
  }
  if (max_abs < kquant::kGroupMaxEps) {
    std::memset(out, 0, kQ6KBytes);
    return true;
  }
  std::uint8_t* ql = out;
  std::uint8_t* qh = out + 128;
  auto* sc = reinterpret_cast<std::int8_t*>(out + 192);
  std::uint8_t* dh = out + 208;
  const float iscale = -128.0f / max_scale;
  if (!store_f16(1.0f / iscale, dh)) return false;
  for (int j = 0; j < 16; ++j) {
    const int v = nearest_int(iscale * scales[j]);
    sc[j] = static_cast<std::int8_t>(v < 127 ? v : 127);
  }
  const float d = load_f16(dh);
  std::uint8_t L[kSuperValues];
  for (int e = 0; e < kSuperValues; ++e) L[e] = static_cast<std::uint8_t>(L8[e]);
  for (int j = 0; j < 16; ++j) {
    const float dj = d * static_cast<float>(sc[j]);
    if (dj == 0.0f) continue;  // keep make_qx_quants' levels
    for (int i = 0; i < 16; ++i) {
      const int l = clamp_int(nearest_int(x[16 * j + i] / dj), -32, 31);
      L[16 * j + i] = static_cast<std::uint8_t>(l + 32);
    }
  }
  for (int n = 0; n < 2; ++n) {
    const std::uint8_t* b = L + 128 * n;
    for (int l = 0; l < 32; ++l) {
      ql[64 * n + l] = static_cast<std::uint8_t>((b[l] & 0xF) | ((b[l + 64] & 0xF) << 4));
      ql[64 * n + 32 + l] = static_cast<std::uint8_t>((b[l + 32] & 0xF) | ((b[l + 96] & 0xF) << 4));
      qh[32 * n + l] = static_cast<std::uint8_t>((b[l] >> 4) | ((b[l + 32] >> 4) << 2) |
                                                 ((b[l + 64] >> 4) << 4) | ((b[l + 96] >> 4) << 6));
    }
  }
  return true;
}

}  // namespace detinfer::kernels::ref
