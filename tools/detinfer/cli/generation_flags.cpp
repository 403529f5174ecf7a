#include "generation_flags.h"

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/generation_fields.h"

namespace detinfer_cli {

namespace {

// The names earlier releases gave some flags, kept as aliases.
std::string alias_of(const std::string& member) {
  if (member == "num_beams") return ",--beams";
  if (member == "num_return_sequences") return ",--n";
  if (member == "stop_strings") return ",--stop";
  return "";
}

// The field's help line and its range in words, with the model's bound spelled out.
std::string help_of(const detinfer::core::FieldSpec& spec) {
  std::string help;
  for (const auto& d : detinfer::core::kGenerationFieldDocs) {
    if (std::string(d.key) == spec.key) help = d.doc;
  }
  std::string range = spec.range;
  const std::size_t at = range.find("{}");
  if (at != std::string::npos) range.replace(at, 2, "the model's");
  return help + ": " + range;
}

}  // namespace

std::string generation_flag(const char* member) {
  std::string flag = std::string("--") + member;
  for (char& ch : flag) {
    if (ch == '_') ch = '-';
  }
  return flag;
}

void add_generation_flags(CLI::App& app, detinfer::GenerationConfig& config) {
  detinfer::core::for_each_field(
      config, [&app](const detinfer::core::FieldSpec& spec, auto& member) {
        using T = std::decay_t<decltype(member)>;
        const std::string names = generation_flag(spec.key) + alias_of(spec.key);
        const std::string help = help_of(spec);
        if constexpr (std::is_same_v<T, bool>) {
          app.add_flag(names, member, help);
        } else if constexpr (std::is_same_v<T, std::optional<std::uint64_t>>) {
          app.add_option(names, member, help);
        } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
          app.add_option_function<std::vector<std::int32_t>>(
                 names, [&member](const std::vector<std::int32_t>& ids) { member = ids; },
                 help + " (1,2,3)")
              ->delimiter(',');
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          app.add_option(names, member, help);
        } else {
          app.add_option(names, member, help)->capture_default_str();
        }
      });
}

}  // namespace detinfer_cli
