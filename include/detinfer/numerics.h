// Numerics modes a session can run in.
#pragma once

#include <cstdint>

namespace detinfer {

enum class NumericsMode : std::uint8_t {
  kCanonical = 0,  // numerics spec v1 kernels: bitwise reproducible (the default)
  kFast = 1,       // libtorch/OpenBLAS ops: no reproducibility guarantee
};

enum class Device : std::uint8_t {
  kCpu = 0,
  kCuda = 1,  // requires a CUDA-enabled build and device
};

}  // namespace detinfer
