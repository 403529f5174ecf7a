// Quantized weight formats: block layouts, the weight quantizer, exact decoding
// (kernels/quant.h, docs/numerics.md "Quantized linear").
#include "kernels/quant.h"

#include <cmath>

#include "core/check.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels {

QuantFormatInfo quant_format_info(QuantFormat f) {
  switch (f) {
    case QuantFormat::kQ8_0:
      return {"q8_0", 32, 34};
  }
  fail(ErrorCode::kInvalidArgument, "unknown quantized format ", static_cast<int>(f));
}

bool parse_quant_format(std::string_view name, QuantFormat* out) {
  if (name == "q8_0") {
    *out = QuantFormat::kQ8_0;
    return true;
  }
  return false;
}

std::int64_t quant_row_bytes(QuantFormat f, std::int64_t k) {
  const QuantFormatInfo info = quant_format_info(f);
  if (k <= 0 || k % info.block_elems != 0)
    fail(ErrorCode::kInvalidArgument, info.name, " needs rows of a positive multiple of ",
         info.block_elems, " weights, got ", k);
  return k / info.block_elems * info.block_bytes;
}

void quantize_rows(QuantFormat f, const float* x, std::int64_t rows, std::int64_t k, void* blocks) {
  const std::int64_t row_bytes = quant_row_bytes(f, k);
  auto* out = static_cast<std::uint8_t*>(blocks);
  std::int8_t q[ref::kQuantBlock];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < k / ref::kQuantBlock; ++b) {
      const float* xb = x + r * k + b * ref::kQuantBlock;
      // Q8_0 weights use the activation quantizer's block rule (ggml's
      // quantize_row_q8_0_ref); it marks a non-finite block with a NaN scale.
      const std::uint16_t dh = ref::quantize_q8_block(xb, q);
      if ((dh & 0x7C00u) == 0x7C00u)
        fail(ErrorCode::kInvalidArgument, "cannot quantize to ", to_string(f), ": row ", r,
             ", block ", b,
             (dh == 0x7E00u ? " holds a NaN or an infinity"
                            : " has a scale beyond binary16 (|w| >= 8.3e6)"));
      std::uint8_t* blk = out + r * row_bytes + b * 34;
      blk[0] = static_cast<std::uint8_t>(dh & 0xFFu);
      blk[1] = static_cast<std::uint8_t>(dh >> 8);
      for (std::int64_t i = 0; i < ref::kQuantBlock; ++i)
        blk[2 + i] = static_cast<std::uint8_t>(q[i]);
    }
  }
}

void dequantize_row(QuantFormat f, const void* blocks, std::int64_t k, float* y) {
  const std::int64_t row_bytes = quant_row_bytes(f, k);
  (void)row_bytes;
  const auto* in = static_cast<const std::uint8_t*>(blocks);
  for (std::int64_t b = 0; b < k / ref::kQuantBlock; ++b) {
    const std::uint8_t* blk = in + b * 34;
    const float d = f16_to_f32(static_cast<std::uint16_t>(blk[0] | (blk[1] << 8)));
    for (std::int64_t i = 0; i < ref::kQuantBlock; ++i)
      y[b * ref::kQuantBlock + i] = d * static_cast<float>(static_cast<std::int8_t>(blk[2 + i]));
  }
}

}  // namespace detinfer::kernels
