// Weight block decoding and quantizers of quantized spec v1 (reference/quant_blocks.h).
#include "kernels/reference/quant_blocks.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/kernels.h"
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

}  // namespace

float decode_block(QuantFormat f, const std::uint8_t* row, std::int64_t b, std::int8_t* q) {
  const std::int64_t bytes = quant_format_info(f).block_bytes;
  const std::uint8_t* blk = row + b * bytes;
  switch (f) {
    case QuantFormat::kQ8_0:
      std::memcpy(q, blk + 2, kQuantBlock);
      break;
    case QuantFormat::kQ4_0:  // byte j: element j in the low nibble, j + 16 in the high
      for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<std::int8_t>((blk[2 + j] & 0x0F) - 8);
        q[j + 16] = static_cast<std::int8_t>((blk[2 + j] >> 4) - 8);
      }
      break;
    case QuantFormat::kQ5_0: {  // bit j of qh: the 5th bit of element j
      std::uint32_t qh;
      std::memcpy(&qh, blk + 2, 4);  // little-endian hosts only (x86-64)
      for (int j = 0; j < 16; ++j) {
        const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        q[j] = static_cast<std::int8_t>(((blk[6 + j] & 0x0F) | h0) - 16);
        q[j + 16] = static_cast<std::int8_t>(((blk[6 + j] >> 4) | h1) - 16);
      }
      break;
    }
  }
  return f16_to_f32(read_u16(blk));
}

bool quantize_block(QuantFormat f, const float* x, std::uint8_t* out) {
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
