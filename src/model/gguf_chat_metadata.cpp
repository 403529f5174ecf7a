// Chat templates (tokenizer.chat_template*), sampling defaults (general.sampling.*) and stop
// tokens from GGUF metadata (docs/gguf.md, "Tokenizers").
#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "detinfer/error.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::model {

namespace {
constexpr char kTemplate[] = "tokenizer.chat_template";
constexpr char kTemplateNames[] = "tokenizer.chat_templates";

// general.sampling.<key> and the generation_config.json field it stands for.
struct SamplingKey {
  const char* gguf;
  const char* field;
  bool integer;
};
constexpr SamplingKey kSamplingKeys[] = {
    {"general.sampling.temp", "temperature", false},
    {"general.sampling.top_p", "top_p", false},
    {"general.sampling.top_k", "top_k", true},
    {"general.sampling.min_p", "min_p", false},
    {"general.sampling.penalty_repeat", "repetition_penalty", false},
};
}  // namespace

std::optional<std::string> gguf_chat_template(const GgufFile& file) {
  return file.find_string(kTemplate);
}

GgufChatTemplates gguf_chat_templates(const GgufFile& file) {
  GgufChatTemplates out;
  if (const auto t = file.find_string(kTemplate)) out.templates["default"] = *t;
  if (file.find(kTemplateNames) == nullptr) return out;
  const GgufValue& names = file.get_array(kTemplateNames, GgufType::kString);
  for (std::size_t i = 0; i < names.strings.size(); ++i) {
    const std::string& name = names.strings[i];
    const std::string key = std::string(kTemplate) + "." + name;
    if (name.empty() || name == "default" || out.templates.count(name) != 0) {
      throw Error(ErrorCode::kCorrupt,
                  str_cat("GGUF metadata '", kTemplateNames, "'[", i, "] '", name,
                          "' is empty, 'default' or repeated"),
                  kTemplateNames);
    }
    const auto t = file.find_string(key);
    if (!t) {
      throw Error(ErrorCode::kCorrupt,
                  str_cat("GGUF metadata '", kTemplateNames, "' names '", name, "' but '", key,
                          "' is missing"),
                  key);
    }
    out.templates[name] = *t;
    out.named = true;
  }
  return out;
}

std::optional<std::string> gguf_generation_config_json(const GgufFile& file) {
  nlohmann::json j = nlohmann::json::object();
  for (const SamplingKey& k : kSamplingKeys) {
    if (file.find(k.gguf) == nullptr) continue;
    if (k.integer) {
      // llama.cpp's top_k <= 0 is "off", transformers' 0.
      j[k.field] = std::max<std::int64_t>(file.get_int(k.gguf), 0);
    } else {
      j[k.field] = *file.find_float(k.gguf);
    }
  }
  if (j.empty()) return std::nullopt;
  return j.dump();
}

std::vector<std::int32_t> gguf_stop_token_ids(const GgufFile& file) {
  const std::size_t n = file.get_array("tokenizer.ggml.tokens", GgufType::kString).strings.size();
  std::vector<std::int32_t> ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const std::optional<std::uint64_t> id = file.find_uint(key);
    if (!id) continue;
    if (*id >= n) {
      throw Error(ErrorCode::kCorrupt,
                  str_cat("GGUF metadata '", key, "' is ", *id, ", outside the vocabulary of ", n,
                          " tokens"),
                  key);
    }
    const auto v = static_cast<std::int32_t>(*id);
    if (std::find(ids.begin(), ids.end(), v) == ids.end()) ids.push_back(v);
  }
  return ids;
}

}  // namespace detinfer::model
