// Builds without nvcc: every CUDA request fails with a clear kUnavailable.
#include "core/check.h"
#include "model/cuda_backend.h"

namespace detinfer::model {

std::shared_ptr<Backend> make_cuda_backend(int device, NumericsMode /*mode*/) {
  throw Error(ErrorCode::kUnavailable,
              str_cat("device cuda:", device,
                      " is unavailable: this build of detinfer has no CUDA support (nvcc was not "
                      "found when it was configured)"),
              "device");
}

}  // namespace detinfer::model
