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
      return {"q8_0", 32, 34};
    case QuantFormat::kQ4_0:
      return {"q4_0", 32, 18};
    case QuantFormat::kQ5_0:
      return {"q5_0", 32, 22};
  }
  fail(ErrorCode::kInvalidArgument, "unknown quantized format ", static_cast<int>(f));
}

bool parse_quant_format(std::string_view name, QuantFormat* out) {
  for (QuantFormat f : {QuantFormat::kQ8_0, QuantFormat::kQ4_0, QuantFormat::kQ5_0}) {
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
  const std::int64_t block_bytes = quant_format_info(f).block_bytes;
  auto* out = static_cast<std::uint8_t*>(blocks);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < k / ref::kQuantBlock; ++b) {
      const float* xb = x + r * k + b * ref::kQuantBlock;
      if (!ref::quantize_block(f, xb, out + r * row_bytes + b * block_bytes))
        fail(ErrorCode::kInvalidArgument, "cannot quantize to ", to_string(f), ": row ", r,
             ", block ", b, " holds a NaN or an infinity or has a scale beyond binary16");
    }
  }
}

void dequantize_row(QuantFormat f, const void* blocks, std::int64_t k, float* y) {
  quant_row_bytes(f, k);  // checks k
  std::int8_t q[ref::kQuantBlock];
  for (std::int64_t b = 0; b < k / ref::kQuantBlock; ++b) {
    const float d = ref::decode_block(f, static_cast<const std::uint8_t*>(blocks), b, q);
    for (std::int64_t i = 0; i < ref::kQuantBlock; ++i)
      y[b * ref::kQuantBlock + i] = d * static_cast<float>(q[i]);  // exact
  }
}

}  // namespace detinfer::kernels
