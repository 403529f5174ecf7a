// Parsing the names of public vocabulary types (the names themselves: to_string in the
// public headers, implemented in core/vocabulary.cpp).
#pragma once

#include <optional>
#include <string_view>

#include "detinfer/generation.h"

namespace detinfer::core {

// The inverse of to_string(FinishReason) ("length", "stop", "cancelled"); nullopt otherwise.
std::optional<FinishReason> parse_finish_reason(std::string_view name);
// The inverse of to_string(ResponseFormatType) ("text", "json_object", "json_schema").
std::optional<ResponseFormatType> parse_response_format_type(std::string_view name);

}  // namespace detinfer::core
