// The CUDA backend: the forward pass's ops over a CudaOps table (model/cuda_ops.h).
#pragma once

#include <memory>

#include "model/backend.h"
#include "model/cuda_ops.h"

namespace detinfer::model {

// A backend on CUDA device `device` in `mode` (kCanonical: bitwise = CPU;
// kDeviceInvariant or kFast: tensor cores). Error(kUnavailable, field "device") naming
// the reason when the build has no CUDA or the device cannot be used
// (cuda_backend_real.cpp, or cuda_backend_none.cpp in builds without nvcc).
std::shared_ptr<Backend> make_cuda_backend(int device, NumericsMode mode);

// The CUDA backend over any CudaOps table (the real one, or the emulator's in tests).
// `name` is what Backend::name() returns ("cuda:0").
std::shared_ptr<Backend> make_cuda_backend_over(std::shared_ptr<CudaOps> ops, NumericsMode mode,
                                                std::string name);

}  // namespace detinfer::model
