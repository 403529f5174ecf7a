#include <chrono>

#include "core/check.h"
#include "model/model.h"
#include "model/model_factories.h"

namespace detinfer::model {

std::unique_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig config = load_model_config(dir);
  const TensorStore store = TensorStore::open(dir);
  // Fast mode on the CPU is libtorch; on CUDA it is the backend's tensor-core kernels.
  const bool torch = options.mode == NumericsMode::kFast && options.device.type == Device::kCpu;
  if (options.kv_dtype != core::DType::kF32 && options.mode != NumericsMode::kCanonical) {
    throw Error(ErrorCode::kUnsupported,
                str_cat("kv_dtype ", core::to_string(options.kv_dtype),
                        " is a canonical-mode option; mode is ", to_string(options.mode)),
                "kv_dtype");
  }
  if (options.weights &&
      (options.mode != NumericsMode::kCanonical || options.device.type != Device::kCpu)) {
    throw Error(ErrorCode::kUnsupported,
                str_cat("weights ", kernels::to_string(*options.weights),
                        " (quantized weights) needs canonical mode on the CPU; mode is ",
                        to_string(options.mode), " on ",
                        options.device.type == Device::kCpu ? "the CPU" : "a GPU"),
                "weights");
  }
  std::unique_ptr<TransformerBase> model = torch ? make_fast_model(config, store, options)
                                                 : make_canonical_model(config, store, options);
  model->set_load_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return model;
}

std::unique_ptr<Model> load_model_on(const std::string& dir, const ModelOptions& options,
                                     std::shared_ptr<Backend> backend) {
  const ModelConfig config = load_model_config(dir);
  const TensorStore store = TensorStore::open(dir);
  return make_canonical_model(config, store, options, std::move(backend));
}

}  // namespace detinfer::model
