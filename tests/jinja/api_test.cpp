// The Template API: errors carry position / field, renders are reproducible and
// thread-safe, context key order is kept.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "detinfer/error.h"
#include "jinja/template.h"

namespace detinfer::jinja {
namespace {

using nlohmann::ordered_json;

TEST(JinjaApi, SyntaxErrorNamesLineAndColumn) {
  try {
    Template::parse("hello\n  {{ 1 + }}");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "chat_template");
    EXPECT_EQ(e.message().rfind("chat template line 2, column 10: ", 0), 0u) << e.message();
  }
  try {
    Template::parse("{% for x in y %}never closed");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("endfor"), std::string::npos) << e.message();
  }
}

TEST(JinjaApi, RaiseExceptionRejectsTheMessages) {
  const Template t = Template::parse(
      "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the "
      "user') }}{% endif %}ok");
  ordered_json ctx = {{"messages", {{{"role", "assistant"}, {"content", "x"}}}}};
  try {
    t.render(ctx, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "messages");
    EXPECT_EQ(e.message(), "first message must be from the user");
  }
  ctx["messages"][0]["role"] = "user";
  EXPECT_EQ(t.render(ctx, 0), "ok");
}

TEST(JinjaApi, ContextKeepsInsertionOrder) {
  const Template t = Template::parse("{{ tool | tojson }}|{% for k in tool %}{{ k }}{% endfor %}");
  ordered_json tool = ordered_json::object();
  tool["name"] = "f";
  tool["description"] = "d";
  tool["arguments"] = {{"z", 1}, {"a", 2}};
  EXPECT_EQ(t.render({{"tool", tool}}, 0),
            "{\"name\": \"f\", \"description\": \"d\", \"arguments\": {\"z\": 1, \"a\": 2}}|"
            "namedescriptionarguments");
}

TEST(JinjaApi, StrftimeNowFormatsTheGivenTime) {
  const Template t = Template::parse("{{ strftime_now('%d %b %Y %H:%M') }}");
  EXPECT_EQ(t.render(ordered_json::object(), 0), "01 Jan 1970 00:00");
  EXPECT_EQ(t.render(ordered_json::object(), 1767225600 + 3600 * 13 + 60 * 7), "01 Jan 2026 13:07");
}

TEST(JinjaApi, ConcurrentRendersAreIdentical) {
  const Template t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content | trim }}{% endfor %}{{ ns.n }}{{ messages | tojson }}");
  ordered_json messages = ordered_json::array();
  for (int k = 0; k < 50; ++k) {
    messages.push_back(
        {{"role", k % 2 ? "assistant" : "user"}, {"content", " m" + std::to_string(k)}});
  }
  const ordered_json ctx = {{"messages", messages}};
  const std::string reference = t.render(ctx, 0);
  std::vector<std::string> outputs(8);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    threads.emplace_back([&, k] {
      for (int r = 0; r < 20; ++r) outputs[k] = t.render(ctx, 0);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& out : outputs) EXPECT_EQ(out, reference);
}

TEST(JinjaApi, CopiesShareTheParsedTemplate) {
  TemplateLimits limits;
  limits.max_depth = 64;
  const Template a = Template::parse("{{ x }}", limits);
  const Template b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(b.limits().max_depth, 64);
  EXPECT_EQ(b.render({{"x", 1.5}}, 0), "1.5");
}

}  // namespace
}  // namespace detinfer::jinja
