// The block formats beyond q8_0 / q4_0 / q5_0 (Q4_1, Q5_1, Q2_K .. Q6_K): decode_block and
// dequantize_row equal an independent decoder written the way ggml's dequantize_row_* walks
// the blocks (super-block loops, shifts and masks), computed exactly in float64 and rounded
// once; the GGUF byte sizes; worked examples of each layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/philox.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/reference/quant_blocks.h"
#include "quant_test_util.h"

namespace detinfer::kernels {
namespace {

double h2d(const std::uint8_t* p) {
  return f16_to_f32(static_cast<std::uint16_t>(p[0] | p[1] << 8));
}

// ggml's order of elements, the value of each as an exact double: d * sc * q - dmin * m.
void ggml_q4_1(const std::uint8_t* b, bool five, double* y) {
  const double d = h2d(b), m = h2d(b + 2);
  std::uint32_t qh = 0;
  if (five) std::memcpy(&qh, b + 4, 4);
  const std::uint8_t* qs = b + (five ? 8 : 4);
  for (int j = 0; j < 16; ++j) {
    const int x0 = (qs[j] & 0x0F) | (five ? static_cast<int>(((qh >> j) << 4) & 0x10) : 0);
    const int x1 = (qs[j] >> 4) | (five ? static_cast<int>((qh >> (j + 12)) & 0x10) : 0);
    y[j] = x0 * d + m;
    y[j + 16] = x1 * d + m;
  }
}

void ggml_q2_k(const std::uint8_t* b, double* y) {
  const double d = h2d(b + 80), dmin = h2d(b + 82);
  const std::uint8_t* q = b + 16;
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const int sc = b[is++];
        for (int l = 0; l < 16; ++l)
          *y++ = d * (sc & 0xF) * ((q[l + 16 * half] >> shift) & 3) - dmin * (sc >> 4);
      }
    }
  }
}

void ggml_q3_k(const std::uint8_t* b, double* y) {
  // The 16 6-bit scales as ggml unpacks them through four uint32 words.
  std::uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const std::uint32_t tmp = aux[2], m1 = 0x03030303u, m2 = 0x0f0f0f0fu;
  aux[2] = ((aux[0] >> 4) & m2) | (((tmp >> 4) & m1) << 4);
  aux[3] = ((aux[1] >> 4) & m2) | (((tmp >> 6) & m1) << 4);
  aux[0] = (aux[0] & m2) | (((tmp >> 0) & m1) << 4);
  aux[1] = (aux[1] & m2) | (((tmp >> 2) & m1) << 4);
  std::int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const double d = h2d(b + 108);
  const std::uint8_t* q = b + 32;
  const std::uint8_t* hm = b;
  int is = 0, mask = 1;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
      for (int half = 0; half < 2; ++half) {
        const int sc = scales[is++] - 32;
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          *y++ = d * sc * (((q[l] >> shift) & 3) - ((hm[l] & mask) ? 0 : 4));
      }
    }
  }
}

void scale_min(int j, const std::uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void ggml_q45_k(const std::uint8_t* b, bool five, double* y) {
  const double d = h2d(b), dmin = h2d(b + 2);
  const std::uint8_t* ql = b + (five ? 48 : 16);
  const std::uint8_t* qh = b + 16;
  int u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
    int sc1, m1, sc2, m2;
    scale_min(is, b + 4, &sc1, &m1);
    scale_min(is + 1, b + 4, &sc2, &m2);
    for (int l = 0; l < 32; ++l)
      *y++ = d * sc1 * ((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - dmin * m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d * sc2 * ((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - dmin * m2;
  }
}

void ggml_q6_k(const std::uint8_t* b, double* y) {
  const double d = h2d(b + 208);
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
  for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      y[l] = d * sc[is] * (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

void ggml_block(QuantFormat f, const std::uint8_t* b, double* y) {
  switch (f) {
    case QuantFormat::kQ4_1:
      return ggml_q4_1(b, false, y);
    case QuantFormat::kQ5_1:
      return ggml_q4_1(b, true, y);
    case QuantFormat::kQ2_K:
      return ggml_q2_k(b, y);
    case QuantFormat::kQ3_K:
      return ggml_q3_k(b, y);
    case QuantFormat::kQ4_K:
      return ggml_q45_k(b, false, y);
    case QuantFormat::kQ5_K:
      return ggml_q45_k(b, true, y);
    default:
      return ggml_q6_k(b, y);
  }
}

constexpr QuantFormat kNewFormats[] = {QuantFormat::kQ4_1, QuantFormat::kQ5_1, QuantFormat::kQ2_K,
                                       QuantFormat::kQ3_K, QuantFormat::kQ4_K, QuantFormat::kQ5_K,
                                       QuantFormat::kQ6_K};

TEST(QuantFormatsTest, DecodeEqualsGgmlsDequantizationRoundedOnce) {
  for (const QuantFormat f : kNewFormats) {
    const QuantFormatInfo info = quant_format_info(f);
    const std::int64_t blocks = 64, k = blocks * info.block_elems;
    const std::vector<std::uint8_t> w = testing::random_blocks(f, blocks, 3 + static_cast<int>(f));
    ASSERT_EQ(quant_row_bytes(f, k), static_cast<std::int64_t>(w.size()));
    std::vector<float> got(static_cast<std::size_t>(k));
    dequantize_row(f, w.data(), k, got.data());
    std::vector<double> want(static_cast<std::size_t>(k));
    for (std::int64_t b = 0; b < blocks; ++b)
      ggml_block(f, w.data() + b * info.block_bytes, want.data() + b * info.block_elems);
    int nonzero = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      // The exact value rounded once to binary32 (the double holds it exactly here).
      ASSERT_EQ(got[i], static_cast<float>(want[i])) << info.name << " element " << i;
      nonzero += got[i] != 0.0f;
    }
    EXPECT_GT(nonzero, k / 2) << info.name;
    // decode_block's integers are within the documented range.
    std::int8_t q[32];
    for (std::int64_t b = 0; b < k / 32; ++b) {
      const ref::BlockScales s = ref::decode_block(f, w.data(), b, q);
      for (int i = 0; i < 32; ++i) {
        const int lo = f == QuantFormat::kQ3_K ? -4 : f == QuantFormat::kQ6_K ? -32 : 0;
        const int hi = f == QuantFormat::kQ2_K                              ? 3
                       : f == QuantFormat::kQ3_K                            ? 3
                       : f == QuantFormat::kQ6_K                            ? 31
                       : f == QuantFormat::kQ4_1 || f == QuantFormat::kQ4_K ? 15
                                                                            : 31;
        ASSERT_GE(q[i], lo) << info.name;
        ASSERT_LE(q[i], hi) << info.name;
      }
      if (!info.has_min) {
        EXPECT_EQ(s.dm, 0.0f);
        EXPECT_EQ(s.m[0] | s.m[1], 0);
      }
      if (!info.sub_scaled) {
        EXPECT_TRUE(s.s[0] == 1 && s.s[1] == 1);
      }
    }
  }
}

TEST(QuantFormatsTest, SizesAndNamesAreGgmls) {
  const std::pair<QuantFormat, std::int64_t> sizes[] = {
      {QuantFormat::kQ4_1, 20},  {QuantFormat::kQ5_1, 24},  {QuantFormat::kQ2_K, 84},
      {QuantFormat::kQ3_K, 110}, {QuantFormat::kQ4_K, 144}, {QuantFormat::kQ5_K, 176},
      {QuantFormat::kQ6_K, 210}};
  for (const auto& [f, bytes] : sizes) {
    EXPECT_EQ(quant_format_info(f).block_bytes, bytes);
    QuantFormat g;
    ASSERT_TRUE(parse_quant_format(to_string(f), &g));
    EXPECT_EQ(g, f);
  }
  EXPECT_EQ(quant_row_bytes(QuantFormat::kQ4_K, 512), 288);
  EXPECT_THROW(quant_row_bytes(QuantFormat::kQ4_K, 96), Error);  // not whole super-blocks
  QuantFormat g;
  EXPECT_FALSE(parse_quant_format("Q4_K", &g));  // names are lower case
}

// Worked examples with hand-computed values.
TEST(QuantFormatsTest, WorkedExamples) {
  // Q4_K: d = 0.5, dmin = 0.25; sub-block 0 scale 3, min 2 (bytes 0 and 4 of the scales);
  // element 0 nibble 5: 0.5 * 3 * 5 - 0.25 * 2 = 7.
  std::vector<std::uint8_t> b(144, 0);
  b[0] = 0x00, b[1] = 0x38;  // 0.5
  b[2] = 0x00, b[3] = 0x34;  // 0.25
  b[4] = 3, b[8] = 2;
  b[16] = 0x05;
  float y[256];
  dequantize_row(QuantFormat::kQ4_K, b.data(), 256, y);
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(y[1], -0.5f);  // nibble 0
  EXPECT_EQ(y[32], 0.0f);  // sub-block 1: scale 0, min 0
  // Q6_K: d = 1, scales[0] = -2; element 0: low nibble 3, high bits 2 -> 35 - 32 = 3 -> -6.
  std::vector<std::uint8_t> c(210, 0);
  c[0] = 0x03;
  c[128] = 0x02;
  c[192] = 0xFE;
  c[208] = 0x00, c[209] = 0x3C;  // 1.0
  dequantize_row(QuantFormat::kQ6_K, c.data(), 256, y);
  EXPECT_EQ(y[0], -6.0f);
  EXPECT_EQ(y[1], 64.0f);  // 0 - 32 = -32 times -2
  // Q4_1: d = 2, m = -1: nibble 7 -> 13.
  std::uint8_t q41[20] = {0x00, 0x40, 0x00, 0xBC, 0x07};
  dequantize_row(QuantFormat::kQ4_1, q41, 32, y);
  EXPECT_EQ(y[0], 13.0f);
  EXPECT_EQ(y[16], -1.0f);
}

}  // namespace
}  // namespace detinfer::kernels
