// The one element type enum of detinfer's weights: the kernels, the safetensors reader
// and writer, the model and the developer tools all use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace detinfer::core {

enum class DType : std::uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

const char* to_string(DType d);         // "f32" | "bf16" | "f16"
const char* safetensors_name(DType d);  // "F32" | "BF16" | "F16"
std::size_t dtype_size(DType d);        // bytes per element: 4 or 2

// The inverses of to_string and safetensors_name; nullopt for any other name.
std::optional<DType> parse_dtype(std::string_view name);
std::optional<DType> parse_safetensors_dtype(std::string_view name);

}  // namespace detinfer::core
