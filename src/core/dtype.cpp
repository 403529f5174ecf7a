#include "core/dtype.h"

namespace detinfer::core {
namespace {

struct DTypeNames {
  DType dtype;
  const char* name;         // to_string
  const char* safetensors;  // safetensors_name
};

constexpr DTypeNames kNames[] = {
    {DType::kF32, "f32", "F32"}, {DType::kBF16, "bf16", "BF16"}, {DType::kF16, "f16", "F16"}};

const DTypeNames* find(DType d) {
  for (const DTypeNames& n : kNames) {
    if (n.dtype == d) return &n;
  }
  return nullptr;
}

}  // namespace

const char* to_string(DType d) {
  const DTypeNames* n = find(d);
  return n != nullptr ? n->name : "unknown";
}

const char* safetensors_name(DType d) {
  const DTypeNames* n = find(d);
  return n != nullptr ? n->safetensors : "?";
}

std::size_t dtype_size(DType d) { return d == DType::kF32 ? 4 : 2; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeNames& n : kNames) {
    if (name == n.name) return n.dtype;
  }
  return std::nullopt;
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const DTypeNames& n : kNames) {
    if (name == n.safetensors) return n.dtype;
  }
  return std::nullopt;
}

}  // namespace detinfer::core
