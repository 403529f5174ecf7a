// Weight block decoding and quantizers of quantized spec v1 (reference/quant_blocks.h).
#include "kernels/reference/quant_blocks.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_kquantize.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels::ref {
namespace {

std::uint16_t read_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
void write_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xFFu);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

// ggml's q4_0 / q5_0 reference quantizer with `levels` = 16 or 32 (bias levels / 2):
// max = the value of largest |x| (the first on ties); d = max / -(levels / 2);
// id = 1 / d; u[i] = min(levels - 1, trunc(x[i] * id + (levels / 2 + 0.5))).
// A scale that rounds to binary16 zero gives u[i] = levels / 2 (value 0).
bool quantize_offset(const float* x, int levels, std::uint16_t* dh, int* u) {
  float amax = 0.0f, max = 0.0f;
  for (std::int64_t i = 0; i < kQuantBlock; ++i) {
    if (!std::isfinite(x[i])) return false;
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float half = static_cast<float>(levels / 2);
  const float d = max / -half;
  *dh = f32_to_f16_rne(d);
  if ((*dh & 0x7C00u) == 0x7C00u) return false;
  if ((*dh & 0x7FFFu) == 0) {
    for (std::int64_t i = 0; i < kQuantBlock; ++i) u[i] = levels / 2;
    return true;
  }
  const float id = 1.0f / d;
  for (std::int64_t i = 0; i < kQuantBlock; ++i) {
    const int t = static_cast<int>(x[i] * id + (half + 0.5f));  // truncation toward zero
    u[i] = t < levels - 1 ? t : levels - 1;
  }
  return true;
}

// The formats beyond q8_0 / q4_0 / q5_0 (quant_kquantize.h, ggml's reference quantizers).
bool quantize_block_ggml(QuantFormat f, const float* x, std::uint8_t* out) {
  switch (f) {
    case QuantFormat::kQ4_1:
      return quantize_q4_1_block(x, out);
    case QuantFormat::kQ5_1:
      return quantize_q5_1_block(x, out);
    case QuantFormat::kQ2_K:
      return quantize_q2_k_block(x, out);
    case QuantFormat::kQ3_K:
      return quantize_q3_k_block(x, out);
    case QuantFormat::kQ4_K:
      return quantize_q4_k_block(x, out);
    case QuantFormat::kQ5_K:
      return quantize_q5_k_block(x, out);
    case QuantFormat::kQ6_K:
      return quantize_q6_k_block(x, out);
    default:
      return false;
  }
}

// Q8_0 / Q4_0 / Q5_0 / Q4_1 / Q5_1: one 32-weight block per ggml block.
BlockScales decode_legacy(QuantFormat f, const std::uint8_t* blk, std::int8_t* q) {
  BlockScales s;
  s.d = f16_to_f32(read_u16(blk));
  const bool with_min = f == QuantFormat::kQ4_1 || f == QuantFormat::kQ5_1;
  if (with_min) {  // w = d * q + m = d * q - (-m) * 1
    s.dm = -f16_to_f32(read_u16(blk + 2));
    s.m[0] = s.m[1] = 1;
  }
  const std::uint8_t* data = blk + (with_min ? 4 : 2);
  switch (f) {
    case QuantFormat::kQ8_0:
      std::memcpy(q, data, kQuantBlock);
      return s;
    case QuantFormat::kQ4_0:
    case QuantFormat::kQ4_1: {  // byte j: element j in the low nibble, j + 16 in the high
      const int off = f == QuantFormat::kQ4_0 ? 8 : 0;
      for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<std::int8_t>((data[j] & 0x0F) - off);
        q[j + 16] = static_cast<std::int8_t>((data[j] >> 4) - off);
      }
      return s;
    }
    default: {  // Q5_0 / Q5_1: bit j of qh is the 5th bit of element j
      const int off = f == QuantFormat::kQ5_0 ? 16 : 0;
      std::uint32_t qh;
      std::memcpy(&qh, data, 4);  // little-endian hosts only (x86-64)
      for (int j = 0; j < 16; ++j) {
        const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        q[j] = static_cast<std::int8_t>(((data[4 + j] & 0x0F) | h0) - off);
        q[j + 16] = static_cast<std::int8_t>(((data[4 + j] >> 4) | h1) - off);
      }
      return s;
    }
  }
}

// ggml's 6-bit scale and min j (0..7) of a Q4_K / Q5_K super-block's 12 scale bytes.
void scale_min_k4(int j, const std::uint8_t* sc, int* scale, int* min) {
  if (j < 4) {
    *scale = sc[j] & 63;
    *min = sc[j + 4] & 63;
  } else {
    *scale = (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 6) << 4);
    *min = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

// Q3_K's 6-bit scale t (0..15) of its 12 scale bytes: the low 4 bits are nibble t % 8 (low
// nibbles of bytes 0..7, then their high nibbles), the high 2 bits are bits 2(t / 4) of byte
// 8 + t % 4.
int scale_q3k(int t, const std::uint8_t* sc) {
  const int low = t < 8 ? sc[t] & 0x0F : sc[t - 8] >> 4;
  return low | (((sc[8 + t % 4] >> (2 * (t / 4))) & 3) << 4);
}

// Chunk c (0..7) of 32 weights of a K super-block at blk.
BlockScales decode_kquant(QuantFormat f, const std::uint8_t* blk, int c, std::int8_t* q) {
  BlockScales s;
  for (int i = 0; i < 32; ++i) {
    const int e = 32 * c + i, n = e / 128, part = (e % 128) / 32, l = e % 32;
    switch (f) {
      case QuantFormat::kQ2_K:  // scales[16], qs[64], d, dmin
        q[i] = static_cast<std::int8_t>((blk[16 + 32 * n + l] >> (2 * part)) & 3);
        break;
      case QuantFormat::kQ3_K: {  // hmask[32], qs[64], scales[12], d
        const int hi = (blk[l] >> (4 * n + part)) & 1;
        q[i] = static_cast<std::int8_t>(((blk[32 + 32 * n + l] >> (2 * part)) & 3) - (hi ? 0 : 4));
        break;
      }
      case QuantFormat::kQ4_K:    // d, dmin, scales[12], qs[128]
      case QuantFormat::kQ5_K: {  // d, dmin, scales[12], qh[32], qs[128]
        const std::uint8_t* qs = blk + (f == QuantFormat::kQ4_K ? 16 : 48);
        int v = c % 2 == 0 ? qs[32 * (c / 2) + i] & 0x0F : qs[32 * (c / 2) + i] >> 4;
        if (f == QuantFormat::kQ5_K) v |= ((blk[16 + i] >> c) & 1) << 4;
        q[i] = static_cast<std::int8_t>(v);
        break;
      }
      default: {  // Q6_K: ql[128], qh[64], int8 scales[16], d
        const std::uint8_t lb = blk[64 * n + l + 32 * (part & 1)];
        const int low = part < 2 ? lb & 0x0F : lb >> 4;
        const int high = (blk[128 + 32 * n + l] >> (2 * part)) & 3;
        q[i] = static_cast<std::int8_t>((low | high << 4) - 32);
        break;
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int t = 2 * c + h;  // the 16-weight sub-block
    switch (f) {
      case QuantFormat::kQ2_K:
        s.d = f16_to_f32(read_u16(blk + 80));
        s.dm = f16_to_f32(read_u16(blk + 82));
        s.s[h] = blk[t] & 0x0F;
        s.m[h] = blk[t] >> 4;
        break;
      case QuantFormat::kQ3_K:
        s.d = f16_to_f32(read_u16(blk + 108));
        s.s[h] = scale_q3k(t, blk + 96) - 32;
        break;
      case QuantFormat::kQ4_K:
      case QuantFormat::kQ5_K:
        s.d = f16_to_f32(read_u16(blk));
        s.dm = f16_to_f32(read_u16(blk + 2));
        scale_min_k4(c, blk + 4, &s.s[h], &s.m[h]);
        break;
      default:
        s.d = f16_to_f32(read_u16(blk + 208));
        s.s[h] = static_cast<std::int8_t>(blk[192 + t]);
        break;
    }
  }
  return s;
}

}  // namespace

BlockScales decode_block(QuantFormat f, const std::uint8_t* row, std::int64_t b, std::int8_t* q) {
  const QuantFormatInfo info = quant_format_info(f);
  if (!info.sub_scaled) return decode_legacy(f, row + b * info.block_bytes, q);
  const std::int64_t per = info.block_elems / kQuantBlock;  // 8 blocks per super-block
  return decode_kquant(f, row + (b / per) * info.block_bytes, static_cast<int>(b % per), q);
}

void dequantize_block(QuantFormat f, const std::uint8_t* row, std::int64_t b, float* y) {
  std::int8_t q[kQuantBlock];
  const BlockScales s = decode_block(f, row, b, q);
  const bool has_min = quant_format_info(f).has_min;
  for (std::int64_t i = 0; i < kQuantBlock; ++i) {
    const float w = s.d * static_cast<float>(s.s[i / 16] * q[i]);  // exact
    y[i] = has_min ? w - s.dm * static_cast<float>(s.m[i / 16]) : w;
  }
}

bool quantize_block(QuantFormat f, const float* x, std::uint8_t* out) {
  if (f != QuantFormat::kQ8_0 && f != QuantFormat::kQ4_0 && f != QuantFormat::kQ5_0)
    return quantize_block_ggml(f, x, out);
  if (f == QuantFormat::kQ8_0) {
    std::int8_t q[kQuantBlock];
    const std::uint16_t dh = quantize_q8_block(x, q);
    if ((dh & 0x7C00u) == 0x7C00u) return false;  // NaN marker or overflow
    write_u16(out, dh);
    std::memcpy(out + 2, q, kQuantBlock);
    return true;
  }
  const int levels = f == QuantFormat::kQ4_0 ? 16 : 32;
  std::uint16_t dh;
  int u[kQuantBlock];
  if (!quantize_offset(x, levels, &dh, u)) return false;
  write_u16(out, dh);
  if (f == QuantFormat::kQ4_0) {
    for (int j = 0; j < 16; ++j) out[2 + j] = static_cast<std::uint8_t>(u[j] | (u[j + 16] << 4));
    return true;
  }
  std::uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    out[6 + j] = static_cast<std::uint8_t>((u[j] & 0x0F) | ((u[j + 16] & 0x0F) << 4));
    qh |= static_cast<std::uint32_t>((u[j] >> 4) & 1) << j;
    qh |= static_cast<std::uint32_t>((u[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(out + 2, &qh, 4);
  return true;
}

}  // namespace detinfer::kernels::ref
