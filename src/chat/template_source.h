// Where a model's chat template comes from (docs/chat.md, "Where templates come from"):
// an explicit override file, else <model>/chat_template.jinja, else
// <model>/chat_template.json, else tokenizer_config.json "chat_template" (a string or a
// list of named templates). Also the special tokens transformers passes to templates.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "detinfer/hash.h"

namespace detinfer::chat {

struct TemplateSource {
  // Template sources by name; a single unnamed template is stored as "default".
  std::map<std::string, std::string> templates;
  bool named = false;  // the list form: several templates chosen by name
  std::string origin;  // the file it came from ("" when there is no template)
  // transformers' special_tokens_map as template variables: bos_token, eos_token,
  // unk_token, sep_token, pad_token, cls_token, mask_token (strings; AddedToken dicts
  // give their "content"; null ones left out) and additional_special_tokens (a list).
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
  // Over the names and sources of the templates (zero when there is none).
  Hash128 hash;
  // Whether the templates came from tokenizer_config.json (already covered by the
  // tokenizer hash).
  bool from_tokenizer_config = false;
};

// Reads the template of a model folder. override_path ("" = none) is a .json file
// ({"chat_template": string or list}) or a Jinja file (any other name). A folder with no
// template gives empty templates. Throws Error(kNotFound) for a missing override file and
// Error(kCorrupt) naming the file and field for malformed JSON.
TemplateSource load_template_source(const std::string& model_dir, const std::string& override_path);
// The same for a model without a folder (a GGUF file): its tokenizer_config.json given as
// text (model::gguf_tokenizer_json's), `where` naming it in errors. Its chat_template
// counts as from_tokenizer_config; override_path as above.
TemplateSource template_source_from_config(const std::string& tokenizer_config_json,
                                           const std::string& where,
                                           const std::string& override_path);

// The "chat_template" value of a JSON object (string, or list of {"name", "template"}) into
// `out`; `where` names the file for errors.
void read_template_field(const nlohmann::ordered_json& value, const std::string& where,
                         TemplateSource& out);

}  // namespace detinfer::chat
