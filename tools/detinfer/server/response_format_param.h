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

}  // namespace detinfer_cli
