// make_fast_model for a build without libtorch (DETINFER_WITH_TORCH=OFF, or AUTO and not
// found): the fast numerics mode is a clear error at load, never a crash or a silent
// fallback to canonical kernels.
#include "core/check.h"
#include "model/model_factories.h"

namespace detinfer::model {

std::unique_ptr<TransformerBase> make_fast_model(const ModelConfig& /*config*/,
                                                 const TensorSource& /*store*/,
                                                 const ModelOptions& /*options*/) {
  throw Error(ErrorCode::kUnsupported,
              "numerics mode 'fast' needs libtorch, and this detinfer was built without it "
              "(DETINFER_WITH_TORCH=OFF); use mode 'canonical'",
              "mode");
}

}  // namespace detinfer::model
