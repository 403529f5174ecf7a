#include "model/quantize_weights.h"

#include <algorithm>
#include <exception>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"

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
                                           kernels::QuantFormat format, core::ThreadPool* pool) {
  const kernels::QuantFormatInfo info = kernels::quant_format_info(format);
  if (k % info.block_elems != 0) {
    throw Error(ErrorCode::kUnsupported,
                str_cat("weights ", info.name, ": tensor ", name, " has rows of ", k,
                        " weights, not a multiple of ", info.block_elems),
                "weights");
  }
  const std::int64_t row_bytes = kernels::quant_row_bytes(format, k);
  std::vector<std::uint8_t> out;
  core::resize_huge(out, static_cast<std::size_t>(n * row_bytes));
  constexpr std::int64_t kRowsPerChunk = 256;
  const std::int64_t chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(chunks));
  const auto* src = static_cast<const std::uint8_t*>(w);
  const auto quantize = [&](std::int64_t c0, std::int64_t c1) {
    std::vector<float> rows;  // bounded scratch: one chunk of rows
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t r0 = c * kRowsPerChunk, cnt = std::min(kRowsPerChunk, n - r0);
      core::resize_huge(rows, static_cast<std::size_t>(cnt * k));
      widen_to_f32(dtype, src + static_cast<std::size_t>(r0 * k) * core::dtype_size(dtype), cnt * k,
                   rows.data());
      try {
        kernels::quantize_rows(format, rows.data(), cnt, k, out.data() + r0 * row_bytes);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(c)] = std::make_exception_ptr(
            Error(ErrorCode::kInvalidArgument,
                  str_cat("tensor ", name, " (rows from ", r0, "): ", e.what()), name));
      }
    }
  };
  if (pool != nullptr && pool->num_threads() > 1 && chunks > 1) {
    pool->parallel_for(chunks, 1, quantize);
  } else {
    quantize(0, chunks);
  }
  for (const std::exception_ptr& e : errors) {  // the first refused chunk, in row order
    if (e) std::rethrow_exception(e);
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
