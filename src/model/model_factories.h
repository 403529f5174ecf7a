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
// The backend the canonical forward pass runs on for options.device / options.mode:
// Error(kUnavailable) when the device cannot be used (no CUDA build, no device),
// Error(kUnsupported) for a mode the device does not have.
std::shared_ptr<Backend> make_backend(const ModelOptions& options);

std::unique_ptr<TransformerBase> make_fast_model(const ModelConfig& config,
                                                 const TensorStore& store,
                                                 const ModelOptions& options);

}  // namespace detinfer
