// Feature-by-feature conformance: each template of fixtures/snippets.json renders as
// Python Jinja2 (transformers' settings) renders it (fixtures/expected/snippets.json).
#include <gtest/gtest.h>

#include "detinfer/error.h"
#include "jinja/conformance_context.h"
#include "jinja/template.h"

namespace detinfer::jinja {
namespace {

using nlohmann::ordered_json;

std::string fixtures() { return std::string(DETINFER_SOURCE_DIR) + "/tests/jinja/fixtures/"; }

// Renders one case; returns {"output": ...} or {"error": ..., "field": ...}.
ordered_json run_case(const ordered_json& c) {
  try {
    const Template t = Template::parse(c["template"].get<std::string>());
    return {{"output", t.render(c["context"], kConformanceNow)}};
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return {{"error", e.message()}, {"field", e.field()}};
  }
}

TEST(JinjaSnippets, EachFeatureMatchesPythonJinja2) {
  const ordered_json cases = read_json(fixtures() + "snippets.json");
  const ordered_json expected = read_json(fixtures() + "expected/snippets.json");
  ASSERT_EQ(cases.size(), expected.size()) << "rerun gen_expected.py";
  for (std::size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE("snippet " + std::to_string(k) + ": " + cases[k]["template"].get<std::string>());
    const ordered_json got = run_case(cases[k]);
    const ordered_json& want = expected[k];
    if (want.contains("output")) {
      ASSERT_TRUE(got.contains("output")) << got.dump();
      EXPECT_EQ(got["output"].get<std::string>(), want["output"].get<std::string>());
      continue;
    }
    ASSERT_TRUE(got.contains("error"))
        << "rendered " << got.dump() << ", Jinja2 failed with " << want.dump();
    const std::string type = want["error_type"];
    if (type == "TemplateSyntaxError" || type == "TemplateAssertionError") {
      // Syntax errors carry our own position prefix; Jinja2's wording is not copied.
      EXPECT_EQ(got["error"].get<std::string>().rfind("chat template line ", 0), 0u) << got.dump();
      EXPECT_EQ(got["field"], "chat_template");
    } else {
      EXPECT_EQ(got["error"], want["error"]);
      EXPECT_EQ(got["field"], type == "TemplateError" ? "messages" : "chat_template");
    }
  }
}

}  // namespace
}  // namespace detinfer::jinja
