#include "core/check.h"
#include "model/model.h"
#include "model/model_factories.h"

namespace detinfer {

std::unique_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options) {
  const ModelConfig config = load_model_config(dir);
  const TensorStore store = TensorStore::open(dir);
  if (options.mode == NumericsMode::kFast) return make_fast_model(config, store, options);
  return make_canonical_model(config, store, options);
}

}  // namespace detinfer
