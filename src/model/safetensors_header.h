// Parser and validator for the header of a safetensors file
// (https://github.com/huggingface/safetensors: 8-byte little-endian header length N, N
// bytes of JSON, then the tensor bytes). Pure function of the bytes: no I/O, so it is
// also the libFuzzer target (tools/fuzz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace detinfer::model {

// Upper bound on N. Real headers are a few hundred KB; the bound stops a hostile length
// from making us allocate or parse gigabytes.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;

struct TensorInfo {
  std::string name;
  core::DType dtype = core::DType::kF32;  // the dtypes detinfer reads; others are kUnsupported
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section (after the header)
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  std::int64_t numel() const;
};

struct SafetensorsHeader {
  std::uint64_t data_offset = 0;                // 8 + N: where the data section starts in the file
  std::vector<TensorInfo> tensors;              // sorted by name
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Validates and parses the first bytes of a file of `file_size` bytes: `prefix` holds
// at least min(file_size, 8 + N) bytes of it (callers may pass the whole file). Checks
// the length bound, that the header lies inside the file, JSON syntax and nesting
// depth, every entry's fields and dtype, shape x dtype size == byte range, ranges inside
// the data section, and no overlapping ranges. Throws detinfer::Error (kCorrupt, or
// kUnsupported for a known but unsupported dtype) naming `file` and the tensor.
SafetensorsHeader parse_safetensors_header(const std::uint8_t* prefix, std::size_t prefix_size,
                                           std::uint64_t file_size, const std::string& file);

}  // namespace detinfer::model
