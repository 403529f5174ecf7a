#include "core/check.h"
#include "model/cuda_backend.h"
#include "model/model_factories.h"

namespace detinfer::model {

std::shared_ptr<Backend> make_backend(const ModelOptions& options) {
  if (options.device.type == Device::kCuda) {
    return make_cuda_backend(options.device.index, options.mode);
  }
  if (options.mode == NumericsMode::kDeviceInvariant) {
    throw Error(ErrorCode::kUnsupported,
                "numerics mode device_invariant needs a CUDA device (device=cuda); on the CPU "
                "use canonical (which is invariant everywhere) or fast",
                "numerics");
  }
  return make_cpu_backend(options.threads);
}

}  // namespace detinfer::model
