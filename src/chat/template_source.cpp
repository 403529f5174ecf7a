#include "chat/template_source.h"

#include <filesystem>

#include "core/check.h"
#include "core/json_parse.h"

namespace detinfer::chat {

namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr std::size_t kMaxFileBytes = std::size_t{16} << 20;
constexpr core::JsonLimits kLimits{/*max_depth=*/32, kMaxFileBytes, true};

std::string read_text(const fs::path& path) {
  return core::read_file_bounded(path.string(), kMaxFileBytes, path.filename().string());
}

Json parse_json(const fs::path& path) {
  // core::parse_json hardens (depth, size, UTF-8, duplicates); the ordered copy keeps the
  // file's key order, as Python dicts do.
  const nlohmann::json checked =
      core::parse_json(read_text(path), kLimits, ErrorCode::kCorrupt, path.string());
  return Json::parse(checked.dump());
}

// A special token value: a string or an AddedToken dict; "" for null/absent.
std::string token_text(const Json& v, const std::string& where) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    const auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  fail(ErrorCode::kCorrupt, where, ": expected a string or {\"content\": ...}");
}

void add_special_tokens(const Json& cfg, const std::string& file, Json& out) {
  if (!cfg.is_object()) return;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    const auto it = cfg.find(key);
    if (it == cfg.end()) continue;
    const std::string text = token_text(*it, file + ": " + key);
    if (text.empty()) {
      out.erase(key);
    } else {
      out[key] = text;
    }
  }
  const auto extra = cfg.find("additional_special_tokens");
  if (extra == cfg.end() || extra->is_null()) return;
  if (!extra->is_array()) {
    fail(ErrorCode::kCorrupt, file, ": additional_special_tokens: expected a list");
  }
  Json list = Json::array();
  for (std::size_t i = 0; i < extra->size(); ++i) {
    list.push_back(token_text((*extra)[i], str_cat(file, ": additional_special_tokens[", i, "]")));
  }
  if (list.empty()) {
    out.erase("additional_special_tokens");
  } else {
    out["additional_special_tokens"] = std::move(list);
  }
}

Hash128 hash_templates(const TemplateSource& s) {
  if (s.templates.empty()) return {};
  Hasher h;
  h.update_field("detinfer.chat_template.v1");
  h.update_u32(s.named ? 1 : 0);
  for (const auto& [name, source] : s.templates) h.update_field(name).update_field(source);
  return h.digest128();
}

}  // namespace

void read_template_field(const Json& value, const std::string& where, TemplateSource& out) {
  out.templates.clear();
  out.named = false;
  if (value.is_string()) {
    out.templates["default"] = value.get<std::string>();
    return;
  }
  if (!value.is_array()) {
    fail(ErrorCode::kCorrupt, where, ": chat_template: expected a string or a list of ",
         "{\"name\", \"template\"}");
  }
  out.named = true;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& t = value[i];
    const std::string at = str_cat(where, ": chat_template[", i, "]");
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
        !t.contains("template") || !t["template"].is_string()) {
      fail(ErrorCode::kCorrupt, at, ": expected {\"name\": string, \"template\": string}");
    }
    const std::string name = t["name"].get<std::string>();
    if (!out.templates.emplace(name, t["template"].get<std::string>()).second) {
      fail(ErrorCode::kCorrupt, at, ": the name '", name, "' appears twice");
    }
  }
}

namespace {

// The templates of SessionOptions.chat_template_path into `s`: a .json file holding
// "chat_template", or a Jinja file (any other name).
void read_override(const std::string& override_path, TemplateSource& s) {
  const fs::path p(override_path);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    fail(ErrorCode::kNotFound, "SessionOptions.chat_template_path: no such file: ", override_path);
  }
  if (p.extension() == ".json") {
    const Json j = parse_json(p);
    if (!j.is_object() || !j.contains("chat_template")) {
      fail(ErrorCode::kCorrupt, p.string(), ": missing field 'chat_template'");
    }
    read_template_field(j["chat_template"], p.string(), s);
  } else {
    s.templates["default"] = read_text(p);
  }
  s.origin = p.string();
}

// The "chat_template" of a tokenizer_config.json object, if it has one.
void read_config_template(const Json& cfg, const std::string& where, TemplateSource& s) {
  if (!cfg.is_object() || !cfg.contains("chat_template") || cfg["chat_template"].is_null()) return;
  read_template_field(cfg["chat_template"], where, s);
  s.origin = where;
  s.from_tokenizer_config = true;
}

}  // namespace

TemplateSource load_template_source(const std::string& model_dir,
                                    const std::string& override_path) {
  TemplateSource s;
  const fs::path dir(model_dir);
  std::error_code ec;
  // Special tokens: special_tokens_map.json, overridden by tokenizer_config.json.
  const fs::path map_path = dir / "special_tokens_map.json";
  if (fs::exists(map_path, ec))
    add_special_tokens(parse_json(map_path), map_path.string(), s.special_tokens);
  const fs::path cfg_path = dir / "tokenizer_config.json";
  Json cfg;
  if (fs::exists(cfg_path, ec)) {
    cfg = parse_json(cfg_path);
    add_special_tokens(cfg, cfg_path.string(), s.special_tokens);
  }
  if (!override_path.empty()) {
    read_override(override_path, s);
  } else if (fs::exists(dir / "chat_template.jinja", ec)) {
    s.templates["default"] = read_text(dir / "chat_template.jinja");
    s.origin = (dir / "chat_template.jinja").string();
  } else if (fs::exists(dir / "chat_template.json", ec)) {
    const fs::path p = dir / "chat_template.json";
    const Json j = parse_json(p);
    if (!j.is_object() || !j.contains("chat_template")) {
      fail(ErrorCode::kCorrupt, p.string(), ": missing field 'chat_template'");
    }
    read_template_field(j["chat_template"], p.string(), s);
    s.origin = p.string();
  } else {
    read_config_template(cfg, cfg_path.string(), s);
  }
  s.hash = hash_templates(s);
  return s;
}

TemplateSource template_source_from_config(const std::string& tokenizer_config_json,
                                           const std::string& where,
                                           const std::string& override_path) {
  TemplateSource s;
  const nlohmann::json checked =
      core::parse_json(tokenizer_config_json, kLimits, ErrorCode::kCorrupt, where);
  const Json cfg = Json::parse(checked.dump());
  add_special_tokens(cfg, where, s.special_tokens);
  if (!override_path.empty()) {
    read_override(override_path, s);
  } else {
    read_config_template(cfg, where, s);
  }
  s.hash = hash_templates(s);
  return s;
}

}  // namespace detinfer::chat
