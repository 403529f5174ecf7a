// Unicode 16.0 general categories for the pre-tokenizer regexes (docs/tokenizer.md,
// "Unicode version"). Hugging Face `tokenizers` 0.23 matches \p{L}, \p{N}, ... with
// Unicode 16.0 tables; PCRE2 10.42 (Debian 12) has Unicode 14.0's, so characters assigned
// since (CJK Extension H, Egyptian Hieroglyphs Extended-A, Kawi, Garay, ...) would split
// text differently. Patterns are therefore rewritten before PCRE2 sees them: every
// general-category escape becomes the explicit code point ranges of Unicode 16.0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace detinfer::tokenizer {

using CodeRange = std::pair<char32_t, char32_t>;  // inclusive

// "16.0.0": the version of the tables below.
const char* unicode_categories_version();

// The ranges of a general category as PCRE2 names it: one letter (L, M, N, P, S, Z, C),
// two letters (Lu, Ll, ..., Cn) or L& / LC (Lu, Ll, Lt); case, spaces, hyphens and
// underscores ignored, as PCRE2 ignores them. Sorted, disjoint, merged; without the
// surrogates (which no UTF-8 text holds). nullopt for any other name (scripts, binary
// properties, Any).
std::optional<std::vector<CodeRange>> category_ranges(std::string_view name);

// What changed in a general category from Unicode 14.0 (PCRE2 10.42's tables,
// unicode_categories_base_version()) to 16.0: the code points it gained and lost.
struct CategoryDelta {
  std::vector<CodeRange> added;
  std::vector<CodeRange> removed;
};
std::optional<CategoryDelta> category_delta_since_14(std::string_view name);
const char* unicode_categories_base_version();  // "14.0.0"

// The general category of a code point ("Lu", ..., "Cn"; "Cn" beyond U+10FFFF).
const char* general_category(char32_t cp);

// Every code point outside `ranges` (sorted, disjoint), without the surrogates.
std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges);
// PCRE2 class items for `ranges`: \x{41}-\x{5A}\x{61}... (for inside [...]).
void append_code_ranges(std::string& out, const std::vector<CodeRange>& ranges);

// `pattern` with each \p{X}, \pX, \P{X}, \p{^X} whose X is a general category spelled so
// that it matches Unicode 16.0's X on a PCRE2 whose own tables are of `pcre2_unicode`
// (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION)):
// - "16.0.0": the pattern as it is;
// - "14.0.0" (Debian 12's PCRE2 10.42): the escape plus the code points X gained since
//   (`[\p{X}...]`, inside a class `\p{X}...`; negated outside a class
//   `(?:(?![...])\P{X})`), which keeps PCRE2's fast property tests;
// - any other version, or where X also lost code points since 14.0 (Mn): the explicit
//   Unicode 16.0 ranges (inside a class the ranges, a negated escape their complement;
//   outside a class a class of them).
// Left as written: other properties, escapes inside \Q...\E, and escapes where
// case-insensitive matching is on ((?i) / (?i:...)), where a range would also match case
// variants.
std::string pin_unicode_categories(std::string_view pattern, std::string_view pcre2_unicode);

}  // namespace detinfer::tokenizer
