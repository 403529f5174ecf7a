// The names of FinishReason, in one place: fingerprints, diffs, metrics and the server all
// spell them through to_string (include/detinfer/generation.h) and core::parse_finish_reason.
#include "core/vocabulary.h"

#include <array>
#include <utility>

namespace detinfer {

namespace {

constexpr std::array<std::pair<FinishReason, const char*>, 3> kFinishReasons = {{
    {FinishReason::kLength, "length"},
    {FinishReason::kStop, "stop"},
    {FinishReason::kCancelled, "cancelled"},
}};

constexpr std::array<std::pair<ResponseFormatType, const char*>, 3> kResponseFormats = {{
    {ResponseFormatType::kText, "text"},
    {ResponseFormatType::kJsonObject, "json_object"},
    {ResponseFormatType::kJsonSchema, "json_schema"},
}};

template <typename Enum, std::size_t N>
const char* name_of(const std::array<std::pair<Enum, const char*>, N>& names, Enum e) {
  for (const auto& [value, name] : names) {
    if (value == e) return name;
  }
  return "unknown";
}

template <typename Enum, std::size_t N>
std::optional<Enum> parse(const std::array<std::pair<Enum, const char*>, N>& names,
                          std::string_view s) {
  for (const auto& [value, name] : names) {
    if (s == name) return value;
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(FinishReason r) { return name_of(kFinishReasons, r); }
const char* to_string(ResponseFormatType t) { return name_of(kResponseFormats, t); }

namespace core {
std::optional<ResponseFormatType> parse_response_format_type(std::string_view name) {
  return parse(kResponseFormats, name);
}
std::optional<FinishReason> parse_finish_reason(std::string_view name) {
  return parse(kFinishReasons, name);
}
}  // namespace core

}  // namespace detinfer
