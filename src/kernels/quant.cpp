// Quantized weight formats: block layouts, the weight quantizer, exact decoding
// (kernels/quant.h, docs/numerics.md "Quantized linear").
#include "kernels/quant.h"

#include <cmath>

#include "core/check.h"
#include "kernels/kernels.h"
#include "kernels/reference/quant_blocks.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels {

QuantFormatInfo quant_format_info(QuantFormat f) {
  switch (f) {
    case QuantFormat::kQ8_0:
      return {"q8_0", 32, 34, false, false};
    case QuantFormat::kQ4_0:
      return {"q4_0", 32, 18, false, false};
    case QuantFormat::kQ5_0:
      return {"q5_0", 32, 22, false, false};
    case QuantFormat::kQ4_1:
      return {"q4_1", 32, 20, true, false};
    case QuantFormat::kQ5_1:
      return {"q5_1", 32, 24, true, false};
    case QuantFormat::kQ2_K:
      return {"q2_k", 256, 84, true, true};
    case QuantFormat::kQ3_K:
      return {"q3_k", 256, 110, false, true};
    case QuantFormat::kQ4_K:
      return {"q4_k", 256, 144, true, true};
    case QuantFormat::kQ5_K:
      return {"q5_k", 256, 176, true, true};
    case QuantFormat::kQ6_K:
      return {"q6_k", 256, 210, false, true};
  }
  fail(ErrorCode::kInvalidArgument, "unknown quantized format ", static_cast<int>(f));
}

bool parse_quant_format(std::string_view name, QuantFormat* out) {
  for (QuantFormat f : kAllQuantFormats) {
    if (name == quant_format_info(f).name) {
      *out = f;
      return true;
    }
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
  const QuantFormatInfo info = quant_format_info(f);
  auto* out = static_cast<std::uint8_t*>(blocks);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < k / info.block_elems; ++b) {
      const float* xb = x + r * k + b * info.block_elems;
      if (!ref::quantize_block(f, xb, out + r * row_bytes + b * info.block_bytes))
        fail(ErrorCode::kInvalidArgument, "cannot quantize to ", info.name, ": row ", r, ", block ",
             b, " holds a NaN or an infinity or has a scale beyond binary16");
    }
  }
}

void dequantize_row(QuantFormat f, const void* blocks, std::int64_t k, float* y) {
  quant_row_bytes(f, k);  // checks k
  for (std::int64_t b = 0; b < k / ref::kQuantBlock; ++b)
    ref::dequantize_block(f, static_cast<const std::uint8_t*>(blocks), b, y + b * ref::kQuantBlock);
}

}  // namespace detinfer::kernels
