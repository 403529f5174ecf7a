// Numerics modes and devices a session can run on.
#pragma once

#include <cstdint>
#include <string>

#include "detinfer/export.h"

namespace detinfer {

enum class NumericsMode : std::uint8_t {
  kCanonical = 0,  // numerics spec v1 kernels: bitwise reproducible on any CPU or GPU (default)
  kFast = 1,       // libtorch/OpenBLAS ops (CPU): no reproducibility guarantee
  // CUDA only: tensor-core kernels whose bits are invariant to batch composition, prefill
  // chunking and cache hits on one GPU model (not equal to the CPU's bits).
  kDeviceInvariant = 2,
};

// "canonical", "fast", "device_invariant".
DETINFER_API const char* to_string(NumericsMode mode) noexcept;
// The inverse of to_string; Error(kInvalidArgument, field "numerics") otherwise.
DETINFER_API NumericsMode parse_numerics_mode(const std::string& text);

// Storage precision of the KV cache (docs/numerics.md, "KV storage"): kF32 keeps K and V
// as computed (the default); kBF16 and kF16 round each K and V value to nearest-even when
// it is written to the cache, and attention reads the rounded values widened exactly.
enum class KvDType : std::uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

// "f32", "bf16", "f16".
DETINFER_API const char* to_string(KvDType dtype) noexcept;
// The inverse of to_string; Error(kInvalidArgument, field "kv_dtype") otherwise.
DETINFER_API KvDType parse_kv_dtype(const std::string& text);

enum class Device : std::uint8_t {
  kCpu = 0,
  kCuda = 1,  // requires a CUDA-enabled build and device
};

// A device and its index ("cpu", "cuda:0").
struct DeviceSpec {
  Device type = Device::kCpu;
  std::int32_t index = 0;  // CUDA device ordinal; 0 for the CPU
};

// Parses "cpu", "cuda" (= "cuda:0") or "cuda:N" (N in [0, 1023]); Error(kInvalidArgument,
// field "device") naming the text otherwise. Does not check that the device exists.
DETINFER_API DeviceSpec parse_device(const std::string& text);
// "cpu" or "cuda:N".
DETINFER_API std::string to_string(const DeviceSpec& device);

}  // namespace detinfer
