// What a model carries besides its weights: the tokenizer, the chat templates and the
// generation defaults, from a Hugging Face folder's files (tokenizer.json,
// tokenizer_config.json, chat_template.*, generation_config.json) or from a GGUF file's
// metadata (docs/gguf.md, "Tokenizers"), so that the session treats both alike.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/generation_defaults.h"
#include "chat/template_source.h"
#include "detinfer/tokenizer.h"
#include "model/gguf_model.h"

namespace detinfer::session {

struct ModelMetadata {
  std::optional<Tokenizer> tokenizer;  // none: the folder has no tokenizer.json (or the
                                       // GGUF file no tokenizer.ggml.model)
  std::string tokenizer_origin;        // for messages: ".../tokenizer.json" or the GGUF file
  chat::TemplateSource templates;
  // GGUF: the general.sampling.* defaults as a generation_config.json text (none: absent).
  bool gguf = false;
  std::optional<std::string> gguf_generation_json;
  // The opened GGUF model, handed on to model::Model::load so the files are mapped and
  // parsed once (null for a folder, and after it was handed on).
  std::unique_ptr<model::GgufModel> gguf_model;
};

// Reads the tokenizer and the templates of the model at `model_path` (a folder, or a GGUF
// file, folder or split set: model::is_gguf_model). chat_template_path is
// SessionOptions.chat_template_path ("" = the model's own). Errors name the file and key.
ModelMetadata read_model_metadata(const std::string& model_path,
                                  const std::string& chat_template_path);

// The model's generation defaults (generation_config.json, or the GGUF sampling keys);
// detinfer's defaults when there are none.
chat::GenerationDefaults read_generation_defaults(const std::string& model_path,
                                                  const ModelMetadata& metadata,
                                                  std::int64_t context_length);

}  // namespace detinfer::session
