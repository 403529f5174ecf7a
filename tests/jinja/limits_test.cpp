// Hostile templates and inputs: every limit ends the parse or render with a clean
// Error(kResourceExhausted) — never a crash, a hang or unbounded memory.
#include <gtest/gtest.h>

#include <string>

#include "detinfer/error.h"
#include "jinja/template.h"

namespace detinfer::jinja {
namespace {

using nlohmann::ordered_json;

// The code of the Error that parsing + rendering `source` throws (or none: kInternal).
ErrorCode failure(const std::string& source, const TemplateLimits& limits = {},
                  const ordered_json& context = ordered_json::object()) {
  try {
    Template::parse(source, limits).render(context, 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "chat_template") << e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error for " << source.substr(0, 200);
  return ErrorCode::kInternal;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

TEST(JinjaLimits, DeepExpressionNestingFailsAtParse) {
  const std::string source = "{{ " + repeat("(", 20000) + "1" + repeat(")", 20000) + " }}";
  EXPECT_EQ(failure(source), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{{ " + repeat("[", 20000) + repeat("]", 20000) + " }}"),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{{ " + repeat("not ", 20000) + "x }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{{ x" + repeat("|trim", 20000) + " }}"), ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, DeepBlockNestingFailsAtParse) {
  const std::string source = repeat("{% if true %}", 20000) + "x" + repeat("{% endif %}", 20000);
  EXPECT_EQ(failure(source), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure(repeat("{% if a %}{% elif b %}", 20000)), ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, ModerateNestingIsFine) {
  const std::string source = repeat("{% if true %}", 40) + "deep" + repeat("{% endif %}", 40) +
                             "{{ " + repeat("(", 30) + "1" + repeat(")", 30) + " }}";
  EXPECT_EQ(Template::parse(source).render(ordered_json::object(), 0), "deep1");
}

TEST(JinjaLimits, RecursiveMacroHitsDepth) {
  EXPECT_EQ(failure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{% macro f() %}{% call f() %}{% endcall %}{% endmacro %}{{ f() }}"),
            ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, HugeOutputHitsOutputLimit) {
  TemplateLimits limits;
  limits.max_output_bytes = 1 << 16;
  EXPECT_EQ(failure("{% for a in range(100000) %}{% for b in range(100000) %}xxxxxxxx"
                    "{% endfor %}{% endfor %}",
                    limits),
            ErrorCode::kResourceExhausted);
  // The default limit (16 MiB) stops the same kind of template too.
  EXPECT_EQ(failure("{% for a in range(100000) %}{% for b in range(100000) %}{{ 'x' * 4096 }}"
                    "{% endfor %}{% endfor %}"),
            ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, NestedLoopsHitIterationLimit) {
  TemplateLimits limits;
  limits.max_loop_iterations = 100000;
  EXPECT_EQ(failure("{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}",
                    limits),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{% for a in range(100000) %}{% for b in range(100000) %}{% for c in "
                    "range(100000) %}{% endfor %}{% endfor %}{% endfor %}"),
            ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, StringAndListGrowthIsBounded) {
  EXPECT_EQ(failure("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{{ 'x' * 100000000000 }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{{ [1, 2] * 100000000000 }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}"
                    "{% set t = s ~ i %}{% endfor %}"),
            ErrorCode::kResourceExhausted);  // max_work_bytes
  EXPECT_EQ(failure("{% set ns = namespace(l=[]) %}{% for i in range(5000) %}"
                    "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}"),
            ErrorCode::kResourceExhausted);  // list nesting (kMaxValueDepth)
}

TEST(JinjaLimits, PrintingHugeSharedValuesIsBounded) {
  // One 10 MB string held 100000 times: printing, tojson or joining it must not build
  // terabytes.
  const std::string big = "{% set s = 'x' * 10000000 %}{% set l = [s] * 100000 %}";
  EXPECT_EQ(failure(big + "{{ l }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure(big + "{{ l | tojson }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failure("{{ " + repeat("[", 40) + "range(100000) | list" + repeat("]", 40) +
                    " | tojson(indent=1024) }}"),
            ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, SourceSizeIsBounded) {
  TemplateLimits limits;
  limits.max_source_bytes = 100;
  EXPECT_EQ(failure(std::string(101, 'x'), limits), ErrorCode::kResourceExhausted);
}

TEST(JinjaLimits, DeeplyNestedContextIsRefused) {
  ordered_json deep = 1;
  for (int k = 0; k < 5000; ++k) {
    ordered_json outer = ordered_json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  ordered_json ctx = ordered_json::object();
  ctx["x"] = std::move(deep);
  EXPECT_EQ(failure("{{ x }}", {}, ctx), ErrorCode::kResourceExhausted);
}

// Issue 33: the context conversion, printing, tojson and comparison never recurse past
// kMaxValueDepth, whatever the depth handed in (10^3 ... 10^6) or built by the template.
TEST(JinjaLimits, DeepValuesAtEveryScaleAreRefused) {
  for (const int depth : {1000, 10000, 100000, 1000000}) {
    ordered_json deep = ordered_json::array();
    for (int k = 1; k < depth; ++k) {
      ordered_json outer = ordered_json::array();
      outer.push_back(std::move(deep));
      deep = std::move(outer);
    }
    ordered_json ctx = ordered_json::object();
    ctx["x"] = std::move(deep);
    for (const char* use : {"{{ x }}", "{{ x | tojson }}", "{{ x == x }}", "{{ x | length }}"}) {
      EXPECT_EQ(failure(use, {}, ctx), ErrorCode::kResourceExhausted) << depth << " " << use;
    }
  }
  for (const int depth : {1000, 10000}) {
    TemplateLimits limits;
    limits.max_loop_iterations = 2000000;
    const std::string built = "{% set ns = namespace(v=[]) %}{% for i in range(" +
                              std::to_string(depth) +
                              ") %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | tojson }}";
    EXPECT_EQ(failure(built, limits), ErrorCode::kResourceExhausted) << depth;
  }
}

TEST(JinjaLimits, SelfReferencingNamespacePrintsAndFrees) {
  const Template t =
      Template::parse("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns.me.me.a }}{{ ns }}");
  EXPECT_EQ(t.render(ordered_json::object(), 0), "1<Namespace {'a': 1, 'me': <Namespace>}>");
}

}  // namespace
}  // namespace detinfer::jinja
