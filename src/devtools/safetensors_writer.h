// Writes safetensors files (used by the tiny-model generator and by tests). Tensors are
// laid out in name order; the header is padded with spaces to a multiple of 8 bytes so
// that every tensor starts 8-byte aligned, as Hugging Face's writer does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/safetensors_header.h"

namespace detinfer::devtools {

struct TensorEntry {
  std::string name;
  core::DType dtype = core::DType::kF32;
  std::vector<std::int64_t> shape;
};

// Streams the file: produce(i, bytes) must fill `bytes` with entries[i]'s data (exactly
// numel * element size bytes); entries are requested in name order. Throws Error on I/O
// failure or a wrong byte count.
void write_safetensors(
    const std::string& path, std::vector<TensorEntry> entries,
    const std::function<void(const TensorEntry&, std::vector<std::uint8_t>&)>& produce);

// Round-to-nearest-even narrowing conversions (the inverse of kernels' widening ones).
std::uint16_t f32_to_bf16(float f);
std::uint16_t f32_to_f16(float f);

}  // namespace detinfer::devtools
