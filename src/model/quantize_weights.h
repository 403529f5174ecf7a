// Quantizing weights on load (SessionOptions::weights) and decoding already-quantized
// tensors, for the canonical model's weight sink. docs/numerics.md, "Quantized linear".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/quant.h"
#include "model/weight_loader.h"

namespace detinfer::core {
class ThreadPool;
}  // namespace detinfer::core

namespace detinfer::model {

// Whether tensors of `kind` are the weights of a linear (projections, lm_head).
bool is_linear_kind(WeightKind kind);

// n x k weights of dtype (f32/bf16/f16) quantized with kernels::quantize_rows, widened in
// chunks of rows (bounded scratch). Error(kUnsupported, "weights") when k is not a multiple
// of the format's block; a weight the quantizer refuses is Error(kInvalidArgument) naming
// the tensor and the first refused chunk of rows. `pool` (optional) quantizes the chunks
// on its threads: the same bytes and the same error for any thread count.
std::vector<std::uint8_t> quantize_weights(const std::string& name, const void* w,
                                           core::DType dtype, std::int64_t n, std::int64_t k,
                                           kernels::QuantFormat format,
                                           core::ThreadPool* pool = nullptr);

// The tensor's quantized blocks decoded exactly to f32 (the last dimension is the row).
std::vector<float> dequantize_tensor(const WeightSpec& spec, kernels::QuantFormat format,
                                     const void* blocks);

}  // namespace detinfer::model
