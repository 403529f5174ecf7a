#include "session_flags.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "core/json_parse.h"
#include "detinfer/error.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {

json text_to_json(const ConfigField& f, const std::string& text) {
  switch (f.type) {
    case FieldType::kInt: {
      char* end = nullptr;
      errno = 0;
      if (!text.empty() && text[0] != '-') {
        const unsigned long long u = std::strtoull(text.c_str(), &end, 10);
        if (errno == 0 && end && *end == '\0' && end != text.c_str()) return json(u);
      } else {
        const long long i = std::strtoll(text.c_str(), &end, 10);
        if (errno == 0 && end && *end == '\0' && end != text.c_str()) return json(i);
      }
      config_error(f.flag, "expected an integer, got '" + text + "'");
    }
    case FieldType::kDouble: {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || !end || *end != '\0') {
        config_error(f.flag, "expected a number, got '" + text + "'");
      }
      return json(d);
    }
    default:
      return json(text);
  }
}

bool set_from_tree(ToolConfig& config, const json& j, const std::string& prefix,
                   const std::string& file, std::set<std::string>* given) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    const ConfigField* match = nullptr;
    bool is_parent = false;
    for (const auto& f : config_fields()) {
      if (f.key == key) match = &f;
      if (f.key.rfind(key + ".", 0) == 0) is_parent = true;
    }
    if (match) {
      try {
        match->set(config, it.value());
      } catch (const detinfer::Error& e) {
        throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument, file + ": " + e.message(),
                              key);
      }
      if (given) given->insert(key);
    } else if (is_parent && it.value().is_object()) {
      set_from_tree(config, it.value(), key, file, given);
    } else {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            file + ": unknown configuration key '" + key + "'", key);
    }
  }
  return true;
}

bool applies(const ConfigField& f, bool serve, const std::set<std::string>& exclude) {
  return (serve || !f.serve_only) && exclude.count(f.key) == 0;
}

}  // namespace

json config_json(const ToolConfig& config, bool serve, const std::set<std::string>& exclude) {
  json out = json::object();
  for (const auto& f : config_fields()) {
    if (!applies(f, serve, exclude)) continue;
    out[json::json_pointer("/" + [&] {
      std::string p = f.key;
      for (auto& ch : p) {
        if (ch == '.') ch = '/';
      }
      return p;
    }())] = f.get(config);
  }
  return out;
}

void apply_config_json(ToolConfig& config, const json& j, const std::string& file,
                       std::set<std::string>* given) {
  if (!j.is_object()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          file + ": the configuration must be one JSON object");
  }
  set_from_tree(config, j, "", file, given);
}

SessionFlags::SessionFlags(CLI::App& app, bool serve, std::set<std::string> exclude)
    : serve_(serve), exclude_(std::move(exclude)) {
  const ToolConfig defaults;
  for (const auto& f : config_fields()) {
    if (!applies(f, serve_, exclude_)) continue;
    Flag flag{&f, nullptr, std::make_shared<std::string>(), std::make_shared<bool>(false)};
    const std::string dflt = f.get(defaults).dump();
    const std::string help = f.help + " [config: " + f.key + ", default " + dflt + "]";
    if (f.type == FieldType::kBool) {
      const std::string names = f.flag + ",!--no-" + f.flag.substr(2);
      flag.option = app.add_flag(names, *flag.on, help);
    } else {
      flag.option = app.add_option(f.flag, *flag.text, help);
    }
    flags_.push_back(flag);
  }
  app.add_option("--config", config_file_,
                 "JSON configuration file (keys as in --print-config); flags override it");
  app.add_flag("--print-config", print_config_,
               "Print the effective configuration (JSON, auto values resolved) and exit");
}

ToolConfig SessionFlags::resolve() const {
  ToolConfig c;
  given_.clear();
  if (!config_file_.empty()) {
    // The hardened reader every parse site uses: size, depth, UTF-8, duplicate keys.
    const std::string text = detinfer::core::read_file_bounded(config_file_, 1u << 20, "config");
    detinfer::core::JsonLimits limits;
    limits.max_bytes = 1u << 20;
    limits.max_depth = 16;
    const json j =
        detinfer::core::parse_json(text, limits, detinfer::ErrorCode::kInvalidArgument, "config");
    apply_config_json(c, j, config_file_, &given_);
    for (const auto& key : given_) {
      for (const auto& f : config_fields()) {
        if (f.key == key && !applies(f, serve_, exclude_)) {
          throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                                config_file_ + ": '" + key + "' does not apply to this command",
                                key);
        }
      }
    }
  }
  for (const auto& flag : flags_) {
    if (flag.option->count() == 0) continue;
    const json v = flag.field->type == FieldType::kBool ? json(*flag.on)
                                                        : text_to_json(*flag.field, *flag.text);
    flag.field->set(c, v);
    given_.insert(flag.field->key);
  }
  return c;
}

bool SessionFlags::given(const std::string& key) const { return given_.count(key) != 0; }

void SessionFlags::print(const ToolConfig& config,
                         const detinfer::DeterministicSession& session) const {
  ToolConfig effective = config;
  effective.session = session.options();
  std::cout << config_json(effective, serve_, exclude_).dump(2) << "\n";
}

}  // namespace detinfer_cli
