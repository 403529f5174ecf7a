// The CUDA backend's factory (cuda_backend_real.cpp when the build has CUDA,
// cuda_backend_none.cpp otherwise).
#pragma once

#include <memory>

#include "model/backend.h"

namespace detinfer {

// A backend on CUDA device `device` in `mode` (kCanonical: bitwise = CPU;
// kDeviceInvariant or kFast: tensor cores). Error(kUnavailable) naming the reason when
// the build has no CUDA or the device cannot be used.
std::shared_ptr<Backend> make_cuda_backend(int device, NumericsMode mode);

}  // namespace detinfer
