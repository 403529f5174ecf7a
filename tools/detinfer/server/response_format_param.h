// OpenAI's `response_format` request parameter as a GenerationConfig::response_format:
// {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "json_schema":
// {"name": ..., "schema": {...}, "strict": ...}}. The schema's keywords are checked by
// the session (an unsupported one is a 400 naming it).
#pragma once

#include <nlohmann/json.hpp>

#include "detinfer/generation.h"

namespace detinfer_cli {

// Rejects (400, param "response_format") a malformed value.
detinfer::ResponseFormat read_response_format(const nlohmann::json& v);

// A json_schema format's schema text with the client's key order (`ordered`: the request
// body as sent; read_response_format() sees it with sorted keys). The compiler generates
// properties in the order of the schema text (docs/structured.md), as OpenAI does.
void keep_schema_order(const nlohmann::ordered_json& ordered, detinfer::ResponseFormat& format);

}  // namespace detinfer_cli
