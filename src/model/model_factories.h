// Constructors of the two Model implementations (Model::load picks one by mode). The
// fast one lives in its own TU so that only it includes libtorch.
#pragma once

#include <memory>

#include "model/tensor_store.h"
#include "model/transformer_base.h"

namespace detinfer::model {

// `backend` null: make_backend(options).
std::unique_ptr<TransformerBase> make_canonical_model(const ModelConfig& config,
                                                      const TensorSource& store,
                                                      const ModelOptions& options,
                                                      std::shared_ptr<Backend> backend = nullptr);

// Model::load's canonical path over a given backend (tests run the CUDA backend over the
// kernel emulator with it). options.mode should match backend->numerics().
std::unique_ptr<Model> load_model_on(const std::string& dir, const ModelOptions& options,
                                     std::shared_ptr<Backend> backend);
// The backend the canonical forward pass runs on for options.device / options.mode:
// Error(kUnavailable) when the device cannot be used (no CUDA build, no device),
// Error(kUnsupported) for a mode the device does not have.
std::shared_ptr<Backend> make_backend(const ModelOptions& options);

std::unique_ptr<TransformerBase> make_fast_model(const ModelConfig& config,
                                                 const TensorSource& store,
                                                 const ModelOptions& options);

}  // namespace detinfer::model
