#include "model/quantize_weights.h"

#include <algorithm>

#include "core/check.h"

namespace detinfer::model {

bool is_linear_kind(WeightKind kind) {
  switch (kind) {
    case WeightKind::kLmHead:
    case WeightKind::kQ:
    case WeightKind::kK:
    case WeightKind::kV:
    case WeightKind::kO:
    case WeightKind::kGate:
    case WeightKind::kUp:
    case WeightKind::kDown:
    case WeightKind::kQkv:
    case WeightKind::kGateUp:
    case WeightKind::kExpertGate:  // (not kRouter: the router stays in its float type)
    case WeightKind::kExpertUp:
    case WeightKind::kExpertDown:
    case WeightKind::kSharedExpertGate:  // (not kSharedGate: one row, kept float)
    case WeightKind::kSharedExpertUp:
    case WeightKind::kSharedExpertDown:
      return true;
    default:
      return false;
  }
}

std::vector<std::uint8_t> quantize_weights(const std::string& name, const void* w,
                                           core::DType dtype, std::int64_t n, std::int64_t k,
                                           kernels::QuantFormat format) {
  const kernels::QuantFormatInfo info = kernels::quant_format_info(format);
  if (k % info.block_elems != 0) {
    throw Error(ErrorCode::kUnsupported,
                str_cat("weights ", info.name, ": tensor ", name, " has rows of ", k,
                        " weights, not a multiple of ", info.block_elems),
                "weights");
  }
  const std::int64_t row_bytes = kernels::quant_row_bytes(format, k);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n * row_bytes));
  constexpr std::int64_t kRowsPerChunk = 256;
  std::vector<float> rows(static_cast<std::size_t>(std::min(n, kRowsPerChunk) * k));
  const auto* src = static_cast<const std::uint8_t*>(w);
  for (std::int64_t r0 = 0; r0 < n; r0 += kRowsPerChunk) {
    const std::int64_t cnt = std::min(kRowsPerChunk, n - r0);
    widen_to_f32(dtype, src + static_cast<std::size_t>(r0 * k) * core::dtype_size(dtype), cnt * k,
                 rows.data());
    try {
      kernels::quantize_rows(format, rows.data(), cnt, k, out.data() + r0 * row_bytes);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument,
                  str_cat("tensor ", name, " (rows from ", r0, "): ", e.what()), name);
    }
  }
  return out;
}

std::vector<float> dequantize_tensor(const WeightSpec& spec, kernels::QuantFormat format,
                                     const void* blocks) {
  if (spec.shape.empty())
    fail(ErrorCode::kCorrupt, "quantized tensor ", spec.name, " has no shape");
  const std::int64_t k = spec.shape.back();
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < spec.shape.size(); ++i) rows *= spec.shape[i];
  const std::int64_t row_bytes = kernels::quant_row_bytes(format, k);
  std::vector<float> out(static_cast<std::size_t>(rows * k));
  for (std::int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(format, static_cast<const std::uint8_t*>(blocks) + r * row_bytes, k,
                            out.data() + r * k);
  }
  return out;
}

}  // namespace detinfer::model
