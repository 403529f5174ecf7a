// Issue 27 (SessionOptions field table): every row of the library's table
// (session/session_fields.h) is a `detinfer` flag and config key that sets its member, and
// docs/cli.md lists every row of the program's table while every flag it lists exists.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/generation_fields.h"
#include "generation_flags.h"
#include "session/session_fields.h"
#include "session_flags.h"

namespace detinfer_cli {
namespace {

using nlohmann::json;

const ConfigField* row_of(const std::string& key) {
  for (const ConfigField& f : config_fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

// A value of the row's type other than `v` (valid for the member).
std::string other_value(const ConfigField& f, const json& v) {
  switch (f.type) {
    case FieldType::kInt:
      return std::to_string(v.get<std::int64_t>() + 1);
    case FieldType::kDouble:
      return std::to_string(v.get<double>() / 2 + 0.25);
    case FieldType::kString:
      return v.get<std::string>() + "x";
    case FieldType::kEnum: {
      const std::string s = v.get<std::string>();
      if (f.key == "mode") return s == "fast" ? "canonical" : "fast";
      if (f.key == "kv_dtype") return s == "bf16" ? "f16" : "bf16";
      if (f.key == "log_level") return s == "debug" ? "warn" : "debug";
      if (f.key == "fingerprint.level") return s == "final" ? "steps" : "final";
      ADD_FAILURE() << "no test value for enum row " << f.key;
      return s;
    }
    case FieldType::kBool:
      break;
  }
  return "";
}

TEST(OptionTable, EveryTableRowIsAFlagThatSetsItsMember) {
  const ToolConfig defaults;
  for (const detinfer::session::SessionFieldSpec& spec : detinfer::session::kSessionFields) {
    const ConfigField* f = row_of(spec.key);
    ASSERT_NE(f, nullptr) << spec.key;
    EXPECT_EQ(f->flag, spec.flag);
    EXPECT_EQ(f->help, spec.doc);
    CLI::App app;
    SessionFlags flags(app, /*serve=*/true);
    ASSERT_NO_THROW(app.get_option(spec.flag)) << spec.flag;
    const json before = f->get(defaults);
    std::vector<std::string> args = {"detinfer"};
    if (f->type == FieldType::kBool) {
      args.push_back(before.get<bool>() ? "--no-" + std::string(spec.flag + 2) : spec.flag);
    } else {
      args.push_back(spec.flag);
      args.push_back(other_value(*f, before));
    }
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    const ToolConfig c = flags.resolve();
    EXPECT_NE(f->get(c), before) << spec.flag;
    EXPECT_TRUE(flags.given(spec.key)) << spec.key;
  }
}

TEST(OptionTable, EveryTableRowIsAConfigKey) {
  for (const detinfer::session::SessionFieldSpec& spec : detinfer::session::kSessionFields) {
    const ConfigField* f = row_of(spec.key);
    ASSERT_NE(f, nullptr) << spec.key;
    ToolConfig c;
    const json before = f->get(c);
    json file = json::object();
    if (f->type == FieldType::kBool) {
      file[spec.key] = !before.get<bool>();
    } else {
      // The flag's text as JSON: a number or a string.
      const std::string text = other_value(*f, before);
      file[spec.key] = f->type == FieldType::kInt      ? json(std::stoll(text))
                       : f->type == FieldType::kDouble ? json(std::stod(text))
                                                       : json(text);
    }
    apply_config_json(c, file, "test.json");
    EXPECT_NE(f->get(c), before) << spec.key;
  }
}

std::string cli_doc_section() {
  std::ifstream in(std::string(DETINFER_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::size_t begin = doc.find("## Session options");
  const std::size_t end = doc.find("\n## ", begin + 1);
  EXPECT_NE(begin, std::string::npos);
  return doc.substr(begin, end - begin);
}

TEST(OptionTable, DocsListEveryRowAndOnlyFlagsThatExist) {
  const std::string doc = cli_doc_section();
  for (const ConfigField& f : config_fields()) {
    EXPECT_NE(doc.find("| `" + f.key + "` | `" + f.flag + "` |"), std::string::npos)
        << "docs/cli.md does not list " << f.key << " (" << f.flag << ")";
  }
  std::set<std::string> known = {"--config", "--print-config"};
  for (const ConfigField& f : config_fields()) known.insert(f.flag);
  // The flags of the tables' rows (lines starting with '|').
  std::istringstream lines(doc);
  std::string line;
  const std::regex flag_re("`(--[a-z0-9-]+)`");
  int documented = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '|') continue;
    for (std::sregex_iterator it(line.begin(), line.end(), flag_re), e; it != e; ++it) {
      ++documented;
      EXPECT_EQ(known.count((*it)[1]), 1u) << "docs/cli.md lists " << (*it)[1];
    }
  }
  EXPECT_EQ(documented, static_cast<int>(config_fields().size()));
}

}  // namespace
}  // namespace detinfer_cli

namespace detinfer_cli {
namespace {

// `detinfer generate`'s sampling flags come from the GenerationConfig table: one per field,
// each bound to its member; the earlier short names still work.
TEST(GenerationFlags, EveryGenerationFieldIsAFlag) {
  detinfer::GenerationConfig config;
  CLI::App app;
  add_generation_flags(app, config);
  std::size_t fields = 0;
  detinfer::core::for_each_field(config, [&](const detinfer::core::FieldSpec& spec, auto&) {
    ++fields;
    EXPECT_NO_THROW(app.get_option(generation_flag(spec.key))) << spec.key;
  });
  EXPECT_EQ(fields, detinfer::core::kGenerationFieldCount);
  // docs/cli.md's generate section lists each of them.
  std::ifstream in(std::string(DETINFER_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::size_t begin = doc.find("## generate");
  const std::string section = doc.substr(begin, doc.find("\n## ", begin + 1) - begin);
  detinfer::core::for_each_field(config, [&](const detinfer::core::FieldSpec& spec, auto&) {
    EXPECT_NE(section.find("`" + generation_flag(spec.key)), std::string::npos)
        << "docs/cli.md, generate, does not list " << generation_flag(spec.key);
  });
  const char* argv[] = {"g",
                        "--temperature",
                        "0.5",
                        "--top-k",
                        "7",
                        "--beams",
                        "3",
                        "--n",
                        "2",
                        "--stop",
                        "x",
                        "--stop",
                        "y",
                        "--stop-token-ids",
                        "1,2",
                        "--seed",
                        "5",
                        "--ignore-eos",
                        "--first-sample-index",
                        "4"};
  app.parse(static_cast<int>(sizeof(argv) / sizeof(argv[0])), argv);
  EXPECT_EQ(config.temperature, 0.5f);
  EXPECT_EQ(config.top_k, 7);
  EXPECT_EQ(config.num_beams, 3);
  EXPECT_EQ(config.num_return_sequences, 2);
  EXPECT_EQ(config.stop_strings, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(config.stop_token_ids, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(config.seed, std::optional<std::uint64_t>(5));
  EXPECT_TRUE(config.ignore_eos);
  EXPECT_EQ(config.first_sample_index, 4u);
  EXPECT_EQ(config.max_new_tokens, detinfer::GenerationConfig{}.max_new_tokens);
}

}  // namespace
}  // namespace detinfer_cli
