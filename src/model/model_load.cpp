#include <chrono>

#include "core/check.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "model/model_factories.h"

namespace detinfer::model {
namespace {

// The config and tensors of `path`: a Hugging Face folder, or GGUF (gguf_model.h).
struct OpenedModel {
  ModelConfig config;
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<GgufModel> gguf;
  std::unique_ptr<TensorSource> source;
};

OpenedModel open_model(const std::string& path, std::unique_ptr<GgufModel> opened) {
  OpenedModel m;
  if (opened != nullptr || is_gguf_model(path)) {
    m.gguf = opened != nullptr ? std::move(opened) : GgufModel::open(path);
    m.config = gguf_model_config(*m.gguf);
    m.source = std::make_unique<GgufSource>(*m.gguf, m.config);
  } else {
    m.config = load_model_config(path);
    m.store = std::make_unique<TensorStore>(TensorStore::open(path));
    m.source = std::make_unique<SafetensorsSource>(*m.store, m.config);
  }
  return m;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options) {
  return load(dir, options, nullptr);
}

std::unique_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options,
                                   std::unique_ptr<GgufModel> gguf) {
  const auto t0 = std::chrono::steady_clock::now();
  const OpenedModel opened = open_model(dir, std::move(gguf));
  const ModelConfig& config = opened.config;
  // Fast mode on the CPU is libtorch; on CUDA it is the backend's tensor-core kernels.
  const bool torch = options.mode == NumericsMode::kFast && options.device.type == Device::kCpu;
  if (options.kv_dtype != core::DType::kF32 && options.mode != NumericsMode::kCanonical) {
    throw Error(ErrorCode::kUnsupported,
                str_cat("kv_dtype ", core::to_string(options.kv_dtype),
                        " is a canonical-mode option; mode is ", to_string(options.mode)),
                "kv_dtype");
  }
  // Quantized linears run in canonical mode, on the CPU and on CUDA (bitwise the same).
  if (options.weights && options.mode != NumericsMode::kCanonical) {
    throw Error(
        ErrorCode::kUnsupported,
        str_cat("weights ", options.weights->name,
                " (quantized weights) needs canonical mode; mode is ", to_string(options.mode),
                " on ", options.device.type == Device::kCpu ? "the CPU" : "a GPU"),
        "weights");
  }
  std::unique_ptr<TransformerBase> model =
      torch ? make_fast_model(config, *opened.source, options)
            : make_canonical_model(config, *opened.source, options);
  model->set_load_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return model;
}

std::unique_ptr<Model> load_model_on(const std::string& dir, const ModelOptions& options,
                                     std::shared_ptr<Backend> backend) {
  const OpenedModel opened = open_model(dir, nullptr);
  return make_canonical_model(opened.config, *opened.source, options, std::move(backend));
}

}  // namespace detinfer::model
