#include "generation_flags.h"

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/generation_fields.h"
#include "core/json_parse.h"
#include "core/vocabulary.h"

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

// response_format is two flags: --response-format TYPE and --json-schema FILE (which
// implies json_schema). The schema itself is checked when the request is submitted.
void add_response_format_flags(CLI::App& app, detinfer::ResponseFormat& f,
                               const std::string& help) {
  app.add_option_function<std::string>(
      "--response-format",
      [&f](const std::string& name) {
        const auto t = detinfer::core::parse_response_format_type(name);
        if (!t) {
          throw CLI::ValidationError("--response-format",
                                     "'" + name + "' is not text, json_object or json_schema");
        }
        f.type = *t;
      },
      help);
  app.add_option_function<std::string>(
      "--json-schema",
      [&f](const std::string& path) {
        f.type = detinfer::ResponseFormatType::kJsonSchema;
        f.json_schema = detinfer::core::read_file_bounded(path, detinfer::core::kMaxJsonSchemaBytes,
                                                          "--json-schema");
      },
      "File with a JSON Schema the output must follow (implies json_schema; "
      "docs/structured.md)");
}

// --speculative off|ngram|draft: the drafter by name (docs/speculative.md). ngram and draft
// keep an explicit --draft-tokens and otherwise draft kDefaultDraftTokens; draft uses the
// session's --draft-model; off turns speculation off.
constexpr std::int32_t kDefaultDraftTokens = 4;
void add_speculative_flag(CLI::App& app, detinfer::GenerationConfig& config) {
  app.add_option_function<std::string>(
      "--speculative",
      [&config](const std::string& mode) {
        if (mode == "off") {
          config.draft_tokens = 0;
        } else if (mode == "ngram" || mode == "draft") {
          if (config.draft_tokens == 0) config.draft_tokens = kDefaultDraftTokens;
          config.draft_with_model = mode == "draft";
        } else {
          throw CLI::ValidationError("--speculative", "'" + mode + "' is not off, ngram or draft");
        }
      },
      "Speculative decoding: off, ngram (prompt lookup) or draft (the --draft-model); "
      "--draft-tokens N, default 4. Outputs are bitwise those of plain decoding "
      "(docs/speculative.md)");
}

}  // namespace

void SpeculativeFlags::add(CLI::App& app) {
  app.add_option("--speculative", mode,
                 "Speculative decoding: off, ngram (prompt lookup) or draft (the --draft-model); "
                 "outputs are bitwise those of plain decoding (docs/speculative.md)")
      ->check(CLI::IsMember({"off", "ngram", "draft"}))
      ->capture_default_str();
  app.add_option("--draft-tokens", draft_tokens,
                 "Tokens drafted per step with --speculative (default 4)")
      ->check(CLI::Range(1, detinfer::core::kMaxDraftTokens));
}

void SpeculativeFlags::apply(detinfer::GenerationConfig& c) const {
  if (mode == "off") {
    c.draft_tokens = 0;
    return;
  }
  c.draft_tokens = draft_tokens > 0 ? draft_tokens : kDefaultDraftTokens;
  c.draft_with_model = mode == "draft";
}

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
        } else if constexpr (std::is_same_v<T, detinfer::ResponseFormat>) {
          add_response_format_flags(app, member, help);
        } else {
          app.add_option(names, member, help)->capture_default_str();
        }
      });
  add_speculative_flag(app, config);
}

}  // namespace detinfer_cli
