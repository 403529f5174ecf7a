// The auth.* rows of the option table (session_flags.h): where `detinfer serve` reads
// its API keys and which info endpoints need one (serve_auth.h). Keys themselves come
// only from --api-key, so neither the config file nor --print-config ever holds one.
#include "detinfer/error.h"
#include "session_flags.h"

namespace detinfer_cli {
namespace {

using nlohmann::json;

[[noreturn]] void bad_value(const std::string& key, const std::string& expected, const json& v) {
  throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                        key + ": expected " + expected + ", got " + v.dump(), key);
}

ConfigField bool_row(const char* key, const char* flag, const char* help,
                     bool ApiKeyOptions::*member) {
  ConfigField f{key, flag, FieldType::kBool, help, true, {}, {}};
  f.get = [member](const ToolConfig& c) { return json(c.auth.*member); };
  const std::string k = key;
  f.set = [member, k](ToolConfig& c, const json& v) {
    if (!v.is_boolean()) bad_value(k, "true or false", v);
    c.auth.*member = v.get<bool>();
  };
  return f;
}

}  // namespace

std::vector<ConfigField> api_key_rows() {
  ConfigField file{"auth.api_key_file",
                   "--api-key-file",
                   FieldType::kString,
                   "File of API keys, one per line: requests need 'Authorization: Bearer <key>'",
                   true,
                   [](const ToolConfig& c) { return json(c.auth.key_file); },
                   {}};
  file.set = [](ToolConfig& c, const json& v) {
    if (!v.is_string()) bad_value("auth.api_key_file", "a string", v);
    c.auth.key_file = v.get<std::string>();
  };
  return {file,
          bool_row("auth.protect_health", "--auth-health", "With API keys: /health needs a key too",
                   &ApiKeyOptions::protect_health),
          bool_row("auth.protect_metrics", "--auth-metrics",
                   "With API keys: /metrics needs a key too", &ApiKeyOptions::protect_metrics)};
}

}  // namespace detinfer_cli
