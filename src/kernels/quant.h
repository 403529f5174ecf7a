// Quantized weight formats (docs/numerics.md, "Quantized linear (quantized spec v1)"): the
// exact ggml block byte layouts, so that a GGUF tensor's bytes can be handed over as they
// are, the deterministic weight quantizer used when quantizing on load, and exact block
// decoding. The kernels module knows nothing of GGUF type numbers: a loader maps them.
#pragma once

#include <cstdint>
#include <string_view>

namespace detinfer::kernels {

// Version of the quantized-path spec (block decoding, activation quantization, block dot
// products, fold order). Independent of kNumericsSpecVersion: f32/bf16/f16 weights keep
// spec v1's bits; a session with quantized weights is keyed by both.
inline constexpr std::uint32_t kQuantSpecVersion = 1;

// Block formats, each a ggml block layout (little-endian; docs/numerics.md gives every
// layout and the value of each weight):
//   kQ8_0: 34 bytes per 32 weights: fp16 d (binary16 bits), then qs[32] int8;
//          w[i] = f16(d) * qs[i].
//   kQ4_0: 18 bytes: fp16 d, then qs[16]: byte j holds element j in its low nibble and
//          element j + 16 in its high nibble; w[i] = f16(d) * (nibble - 8).
//   kQ5_0: 22 bytes: fp16 d, qh (uint32, bit j = 5th bit of element j), qs[16] as Q4_0;
//          w[i] = f16(d) * ((nibble | bit << 4) - 16).
//   kQ4_1 / kQ5_1: 20 / 24 bytes: fp16 d, fp16 m, then as Q4_0 / Q5_0 without the offset;
//          w[i] = f16(d) * q + f16(m).
//   kQ2_K .. kQ6_K: super-blocks of 256 weights (84, 110, 144, 176, 210 bytes) with
//          integer sub-block scales (and mins for Q2_K, Q4_K, Q5_K) under binary16 d / dmin.
// Every format decodes exactly into blocks of 32 integers q[i] and
//   w[i] = d * (s[i / 16] * q[i]) - dm * m[i / 16]     (ref::BlockScales)
// with s = 1 and no min term for Q8_0 / Q4_0 / Q5_0.
enum class QuantFormat : std::uint8_t {
  kQ8_0 = 0,
  kQ4_0 = 1,
  kQ5_0 = 2,
  kQ4_1 = 3,
  kQ5_1 = 4,
  kQ2_K = 5,
  kQ3_K = 6,
  kQ4_K = 7,
  kQ5_K = 8,
  kQ6_K = 9,
};
inline constexpr QuantFormat kAllQuantFormats[] = {
    QuantFormat::kQ8_0, QuantFormat::kQ4_0, QuantFormat::kQ5_0, QuantFormat::kQ4_1,
    QuantFormat::kQ5_1, QuantFormat::kQ2_K, QuantFormat::kQ3_K, QuantFormat::kQ4_K,
    QuantFormat::kQ5_K, QuantFormat::kQ6_K};

struct QuantFormatInfo {
  const char* name;          // "q8_0"
  std::int64_t block_elems;  // weights per block (32) or super-block (256)
  std::int64_t block_bytes;  // bytes per block (34)
  bool has_min;              // a min term (q4_1, q5_1, q2_k, q4_k, q5_k)
  bool sub_scaled;           // integer sub-block scales (the K formats)
};
QuantFormatInfo quant_format_info(QuantFormat f);
inline const char* to_string(QuantFormat f) { return quant_format_info(f).name; }
// "q8_0" -> kQ8_0; false for any other name.
bool parse_quant_format(std::string_view name, QuantFormat* out);

// Bytes of one row of k weights; Error(kInvalidArgument) unless k is a positive multiple of
// the block size.
std::int64_t quant_row_bytes(QuantFormat f, std::int64_t k);

// The deterministic weight quantizer (ggml's reference algorithms, docs/numerics.md): rows x k
// floats (k a multiple of the block size) into rows * quant_row_bytes(f, k) bytes of blocks.
// A non-finite weight, or a block whose scale overflows binary16, is Error(kInvalidArgument).
void quantize_rows(QuantFormat f, const float* x, std::int64_t rows, std::int64_t k, void* blocks);

// One row of k weights decoded to binary32: d * (s * q) is exact; the min term, where the
// format has one, is one binary32 subtraction (ref::dequantize_block).
void dequantize_row(QuantFormat f, const void* blocks, std::int64_t k, float* y);

}  // namespace detinfer::kernels
