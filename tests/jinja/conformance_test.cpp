// Conformance: real chat templates render byte-identically to Python Jinja2 as
// transformers configures it. Expected outputs come from gen_expected.py (committed in
// fixtures/expected/); each conversation either renders to the same bytes or fails with
// the same error text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "detinfer/error.h"
#include "jinja/conformance_context.h"
#include "jinja/template.h"

namespace detinfer::jinja {
namespace {

using nlohmann::ordered_json;

std::string fixtures() { return std::string(DETINFER_SOURCE_DIR) + "/tests/jinja/fixtures/"; }

struct Counts {
  int rendered = 0;
  int rejected = 0;
};

void check_template(const std::string& name, const ordered_json& spec,
                    const ordered_json& conversations, Counts& counts) {
  const Template tpl = Template::parse(read_text(fixtures() + spec["file"].get<std::string>()));
  const ordered_json expected = read_json(fixtures() + "expected/" + name + ".json");
  ASSERT_EQ(expected.size(), conversations.size()) << name << ": rerun gen_expected.py";
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const ordered_json& want = expected[k];
    const ordered_json& conv = conversations[k];
    ASSERT_EQ(want["conversation"], conv["name"]);
    SCOPED_TRACE(name + " x " + conv["name"].get<std::string>());
    const ordered_json ctx = conformance_context(spec, conv);
    if (want.contains("output")) {
      std::string got;
      try {
        got = tpl.render(ctx, kConformanceNow);
      } catch (const Error& e) {
        ADD_FAILURE() << "unexpected error: " << e.what();
        continue;
      }
      EXPECT_EQ(got, want["output"].get<std::string>());
      ++counts.rendered;
      continue;
    }
    try {
      tpl.render(ctx, kConformanceNow);
      ADD_FAILURE() << "rendered, but Jinja2 failed with: " << want["error"];
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(e.message(), want["error"].get<std::string>());
      // raise_exception() rejects the conversation; other failures are the template's.
      EXPECT_EQ(e.field(), want["error_type"] == "TemplateError" ? "messages" : "chat_template");
      ++counts.rejected;
    }
  }
}

TEST(JinjaConformance, RealTemplatesMatchPythonJinja2) {
  const ordered_json templates = read_json(fixtures() + "templates.json");
  const ordered_json conversations = read_json(fixtures() + "conversations.json");
  ASSERT_GE(templates.size(), 8u);
  ASSERT_GE(conversations.size(), 30u);
  Counts counts;
  for (const auto& [name, spec] : templates.items())
    check_template(name, spec, conversations, counts);
  EXPECT_GT(counts.rendered, 300);
  EXPECT_GT(counts.rejected, 50);
}

}  // namespace
}  // namespace detinfer::jinja
