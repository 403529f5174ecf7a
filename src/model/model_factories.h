// Constructors of the two Model implementations (Model::load picks one by mode). The
// fast one lives in its own TU so that only it includes libtorch.
#pragma once

#include <memory>

#include "model/tensor_store.h"
#include "model/transformer_base.h"

namespace detinfer {

std::unique_ptr<TransformerBase> make_canonical_model(const ModelConfig& config,
                                                      const TensorStore& store,
                                                      const ModelOptions& options);
std::unique_ptr<TransformerBase> make_fast_model(const ModelConfig& config,
                                                 const TensorStore& store,
                                                 const ModelOptions& options);

}  // namespace detinfer
