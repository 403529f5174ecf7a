#include "session/model_metadata.h"

#include <filesystem>

#include "core/memory_limits.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::session {

ModelMetadata read_model_metadata(const std::string& model_path,
                                  const std::string& chat_template_path) {
  ModelMetadata m;
  if (!model::is_gguf_model(model_path)) {
    const std::filesystem::path tok = std::filesystem::path(model_path) / "tokenizer.json";
    if (std::filesystem::exists(tok)) {
      m.tokenizer.emplace(Tokenizer::load(model_path));
      m.tokenizer_origin = tok.string();
    }
    m.templates = chat::load_template_source(model_path, chat_template_path);
    return m;
  }
  // The metadata is the first shard's; mapping the files reads none of the tensor data.
  m.gguf = true;
  m.gguf_model = model::GgufModel::open(model_path);
  const model::GgufModel* g = m.gguf_model.get();
  const model::GgufFile& meta = g->metadata();
  m.tokenizer_origin = g->where();
  std::string config_json = "{}";
  if (meta.find("tokenizer.ggml.model") != nullptr) {
    model::GgufTokenizerJson json = model::gguf_tokenizer_json(meta);
    m.tokenizer.emplace(Tokenizer::from_json(json.tokenizer_json, json.tokenizer_config_json));
    config_json = std::move(json.tokenizer_config_json);
  }
  m.templates = chat::template_source_from_config(config_json, g->where() + " (tokenizer metadata)",
                                                  chat_template_path);
  m.gguf_generation_json = model::gguf_generation_config_json(meta);
  return m;
}

chat::GenerationDefaults read_generation_defaults(const std::string& model_path,
                                                  const ModelMetadata& metadata,
                                                  std::int64_t context_length) {
  if (!metadata.gguf) return chat::load_generation_defaults(model_path, context_length);
  if (!metadata.gguf_generation_json) return {};
  return chat::parse_generation_defaults(*metadata.gguf_generation_json,
                                         model_path + " (general.sampling.*)", context_length);
}

}  // namespace detinfer::session
