#include "response_format_param.h"

#include "core/vocabulary.h"
#include "openai_protocol.h"

namespace detinfer_cli {

namespace {
constexpr const char* kParam = "response_format";
}  // namespace

detinfer::ResponseFormat read_response_format(const nlohmann::json& v) {
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) {
    reject(kParam, "'response_format' must be an object with a string 'type'");
  }
  const std::string type = v["type"].get<std::string>();
  const auto t = detinfer::core::parse_response_format_type(type);
  if (!t) {
    reject(kParam,
           "'response_format.type' must be text, json_object or json_schema, got '" + type + "'");
  }
  detinfer::ResponseFormat f;
  f.type = *t;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "type" &&
        !(f.type == detinfer::ResponseFormatType::kJsonSchema && it.key() == "json_schema")) {
      reject(kParam, "unknown parameter 'response_format." + it.key() + "'");
    }
  }
  if (f.type != detinfer::ResponseFormatType::kJsonSchema) return f;
  if (!v.contains("json_schema") || !v["json_schema"].is_object()) {
    reject(kParam, "'response_format.json_schema' must be an object");
  }
  const nlohmann::json& js = v["json_schema"];
  for (auto it = js.begin(); it != js.end(); ++it) {
    const std::string& k = it.key();
    if (k != "name" && k != "schema" && k != "strict" && k != "description") {
      reject(kParam, "unknown parameter 'response_format.json_schema." + k + "'");
    }
  }
  if (!js.contains("name") || !js["name"].is_string()) {
    reject(kParam, "'response_format.json_schema.name' must be a string");
  }
  if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean()) {
    reject(kParam, "'response_format.json_schema.strict' must be a boolean");
  }
  // Without a schema any JSON value is allowed (OpenAI's default is an empty schema).
  f.json_schema = js.contains("schema") ? js["schema"].dump() : "{}";
  return f;
}

void keep_schema_order(const nlohmann::ordered_json& ordered, detinfer::ResponseFormat& format) {
  if (format.type != detinfer::ResponseFormatType::kJsonSchema) return;
  if (!ordered.is_object() || !ordered.contains(kParam) || !ordered[kParam].is_object()) return;
  const nlohmann::ordered_json& rf = ordered[kParam];
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object()) return;
  const nlohmann::ordered_json& js = rf["json_schema"];
  if (js.contains("schema")) format.json_schema = js["schema"].dump();
}

}  // namespace detinfer_cli
