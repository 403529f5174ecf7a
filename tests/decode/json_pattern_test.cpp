// `pattern` in constrained decoding (docs/structured.md): the regex subset matched
// exactly (search semantics, anchors, lengths), hostile patterns refused quickly with an
// error naming `pattern`, and no generation ever cornered.
#include <gtest/gtest.h>

#include <string>

#include "decode/json_schema.h"
#include "decode/json_test_support.h"
#include "detinfer/error.h"

namespace detinfer::decode {
namespace {

// `pattern` and lengths as JSON text; `value` is the JSON string written.
std::shared_ptr<const JsonGrammar> pattern(const std::string& json_pattern,
                                           const std::string& extra = "") {
  return grammar(R"({"type": "string", "pattern": )" + json_pattern + extra + "}");
}

std::string pattern_error(const std::string& json_pattern, const std::string& extra = "") {
  try {
    pattern(json_pattern, extra);
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "response_format");
    EXPECT_NE(e.message().find("'pattern'"), std::string::npos) << e.message();
    return e.message();
  }
  return "";
}

TEST(JsonPattern, MatchesTheSubsetExactly) {
  const auto word = pattern(R"("^[a-z]{2,4}$")");
  for (const char* ok : {R"("ab")", R"("abcd")"}) EXPECT_TRUE(accepts(word, ok)) << ok;
  for (const char* no : {R"("a")", R"("abcde")", R"("AB")", R"("a1")"}) {
    EXPECT_FALSE(accepts(word, no)) << no;
  }
  const auto phone = pattern(R"("^\\d{3}-\\d{4}$")");
  EXPECT_TRUE(accepts(phone, R"("555-1234")"));
  EXPECT_FALSE(accepts(phone, R"("5551234")"));
  const auto search = pattern(R"("abc")");  // unanchored: anywhere in the string
  EXPECT_TRUE(accepts(search, R"("xxabcyy")"));
  EXPECT_TRUE(accepts(search, R"("abc")"));
  EXPECT_FALSE(accepts(search, R"("ab c")"));
  const auto alt = pattern(R"("^a$|^bb$|c")");
  for (const char* ok : {R"("a")", R"("bb")", R"("xcx")"}) EXPECT_TRUE(accepts(alt, ok)) << ok;
  for (const char* no : {R"("ab")", R"("bbb")", R"("")"}) EXPECT_FALSE(accepts(alt, no)) << no;
  const auto groups = pattern(R"("^(?:ab)+(x|yz)?\\.$")");
  for (const char* ok : {R"("ab.")", R"("ababyz.")", R"("abx.")"}) {
    EXPECT_TRUE(accepts(groups, ok)) << ok;
  }
  EXPECT_FALSE(accepts(groups, R"("aba.")"));
  EXPECT_FALSE(accepts(groups, R"("abx")"));
  const auto escapes = pattern(R"("^a\\nb\"\\\\[\\t/]$")");  // regex ^a\nb"\\[\t/]$
  EXPECT_TRUE(accepts(escapes, R"("a\nb\"\\\t")"));
  EXPECT_TRUE(accepts(escapes, R"("a\nb\"\\/")"));
  EXPECT_TRUE(accepts(escapes, R"("a\nb\"\\\/")"));
  EXPECT_FALSE(accepts(escapes, R"("anb\"\\/")"));
  const auto cls = pattern(R"("^[^a-y\\s][\\w-]?$")");
  EXPECT_TRUE(accepts(cls, R"("z")"));
  EXPECT_TRUE(accepts(cls, R"("Z-")"));
  EXPECT_FALSE(accepts(cls, R"("a")"));
  EXPECT_FALSE(accepts(cls, R"(" ")"));
  EXPECT_FALSE(accepts(pattern(R"("^.$")"), "\"\xC3\xA9\""));  // ASCII only
  EXPECT_TRUE(accepts(pattern(R"("(a+)+$")"), R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!a")"));
}

TEST(JsonPattern, LengthsCombineWithThePattern) {
  const auto max = pattern(R"("^a+$")", R"(, "maxLength": 3)");
  EXPECT_TRUE(accepts(max, R"("aaa")"));
  EXPECT_FALSE(accepts(max, R"("aaaa")"));
  const auto min = pattern(R"("^(ab)+$")", R"(, "minLength": 3)");
  EXPECT_FALSE(accepts(min, R"("ab")"));
  EXPECT_TRUE(accepts(min, R"("abab")"));
  const auto both = pattern(R"("x")", R"(, "minLength": 2, "maxLength": 3)");
  EXPECT_TRUE(accepts(both, R"("\nx")"));  // an escape counts as one character
  EXPECT_FALSE(accepts(both, R"("x")"));
  EXPECT_FALSE(accepts(both, R"("abcx")"));
  // Odd lengths only: maxLength 4 leaves 1 and 3.
  const auto odd = pattern(R"("^a(aa)*$")", R"(, "minLength": 2, "maxLength": 4)");
  EXPECT_TRUE(accepts(odd, R"("aaa")"));
  EXPECT_FALSE(accepts(odd, R"("aaaa")"));
  EXPECT_NE(pattern_error(R"("^(aa)+$")", R"(, "minLength": 3, "maxLength": 3)").find("admits no"),
            std::string::npos);
}

TEST(JsonPattern, GenerationIsNeverCornered) {
  for (const auto& [p, extra] : std::vector<std::pair<std::string, std::string>>{
           {R"("^[a-z]{2,4}$")", ""},
           {R"("^\\d{3}-\\d{4}$")", ""},
           {R"("abc")", R"(, "maxLength": 5)"},
           {R"("^a(aa)*$")", R"(, "minLength": 2, "maxLength": 8)"},
           {R"("^[\"\\\\]+x$")", R"(, "maxLength": 4)"},  // characters written as escapes
           {R"("^(red|green|blue)$")", ""},
           {R"("\\n")", R"(, "minLength": 3)"}}) {
    const auto g = pattern(p, extra);
    EXPECT_GT(walk_never_stuck(g, 21, 4000).size(), 5u) << p << extra;
  }
}

TEST(JsonPattern, HostileAndUnsupportedPatternsAreErrorsNamingPattern) {
  for (const char* p :
       {R"p("(a)\\1")p",  R"p("(?=a)")p", R"p("(?<n>a)")p", R"p("\\bx")p",
        R"p("a**")p",     R"p("[]")p",    R"p("[z-a]")p",   R"p("a^")p",
        R"p("^a$b")p",    R"p("(a")p",    R"p("a)")p",      R"p("\\p{L}")p",
        R"p("x{2,1}")p",  R"p("x{,3}")p", R"p("[\\d-z]")p", "\"\xC3\xA9\"",
        R"p("\\u00e9")p", R"p("*a")p",    R"p("a{1001}")p", R"p("[^\\x00-\\x7f]")p"}) {
    EXPECT_NE(pattern_error(p), "") << p;
  }
  // Expansion and determinisation are bounded: refused, never exponential.
  EXPECT_NE(pattern_error(R"p("((a{100}){100}){100}")p").find("automaton states"),
            std::string::npos);
  EXPECT_NE(pattern_error(R"p("^(a|b)*a(a|b){12}$")p").find("DFA states"), std::string::npos);
  EXPECT_NE(pattern_error("\"" + std::string(1100, 'a') + "\"").find("longer than"),
            std::string::npos);
  EXPECT_NE(pattern_error(R"p("^(a|b){8}$")p", R"(, "minLength": 4000)"), "");  // no string fits
  EXPECT_EQ(pattern_error(R"p("^a*$")p", R"(, "maxLength": 4000)"), "");
  try {
    grammar(R"({"type": "string", "pattern": "a", "format": "date"})");
    ADD_FAILURE() << "pattern beside format";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("'pattern' beside 'format'"), std::string::npos);
  }
  EXPECT_NE(pattern_error("5"), "");
}

// Many distinct patterns add up to a bounded total; equal ones are compiled once.
TEST(JsonPattern, PatternsOfOneSchemaAreBoundedTogether) {
  const auto schema_of = [](bool distinct) {
    std::string props;
    for (int i = 0; i < 40; ++i) {
      const std::string tail = distinct ? std::to_string(i) : "0";
      props += std::string(i ? ", " : "") + "\"p" + std::to_string(i) +
               R"(": {"type": "string", "pattern": "^(a|b)*a(a|b){7})" + tail + R"($"})";
    }
    return R"({"type": "object", "properties": {)" + props + "}}";
  };
  EXPECT_EQ(error_of(schema_of(false)), "");
  EXPECT_NE(error_of(schema_of(true)).find("patterns need more than 4096 DFA states"),
            std::string::npos);
}

}  // namespace
}  // namespace detinfer::decode
