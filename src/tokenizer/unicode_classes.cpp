#include "tokenizer/unicode_classes.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/check.h"

namespace detinfer::tokenizer {
namespace {

struct CategoryRun {
  char32_t start;
  std::uint8_t category;
};

#include "tokenizer/unicode_categories.inc"

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

std::string normalized_name(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (c == ' ' || c == '_' || c == '-') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Which of kCategoryNames a normalized name selects (empty: not a general category).
std::vector<std::size_t> selected_categories(const std::string& name) {
  std::vector<std::size_t> out;
  const std::size_t n = std::size(kCategoryNames);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string c = normalized_name(kCategoryNames[i]);
    const bool cased = c == "lu" || c == "ll" || c == "lt";
    if (c == name || (name.size() == 1 && c[0] == name[0]) ||
        ((name == "l&" || name == "lc") && cased)) {
      out.push_back(i);
    }
  }
  return out;
}

// Appends [a, b] without the surrogates, merged with the last range when adjacent.
void add_range(std::vector<CodeRange>& out, char32_t a, char32_t b) {
  if (a <= kSurrogateLast && b >= kSurrogateFirst) {
    if (a < kSurrogateFirst) add_range(out, a, kSurrogateFirst - 1);
    if (b > kSurrogateLast) add_range(out, kSurrogateLast + 1, b);
    return;
  }
  if (!out.empty() && out.back().second + 1 == a) {
    out.back().second = b;
  } else {
    out.emplace_back(a, b);
  }
}

}  // namespace

std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& in) {
  std::vector<CodeRange> out;
  char32_t next = 0;
  for (const CodeRange& r : in) {
    if (r.first > next) add_range(out, next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) add_range(out, next, kMaxCodePoint);
  return out;
}

namespace {

void append_hex(std::string& out, char32_t cp) {
  static const char* digits = "0123456789ABCDEF";
  std::string h;
  do {
    h += digits[cp & 0xF];
    cp >>= 4;
  } while (cp != 0);
  out += "\\x{";
  out.append(h.rbegin(), h.rend());
  out += '}';
}

}  // namespace

void append_code_ranges(std::string& out, const std::vector<CodeRange>& ranges) {
  for (const CodeRange& r : ranges) {
    append_hex(out, r.first);
    if (r.second != r.first) {
      out += '-';
      append_hex(out, r.second);
    }
  }
}

const char* unicode_categories_version() { return kUnicodeVersion; }

const char* general_category(char32_t cp) {
  if (cp > kMaxCodePoint) return "Cn";
  const auto it = std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), cp,
                                   [](char32_t c, const CategoryRun& r) { return c < r.start; });
  return kCategoryNames[std::prev(it)->category];
}

namespace {

template <std::size_t N>
std::optional<std::vector<CodeRange>> ranges_of(const CategoryRun (&runs)[N],
                                                std::string_view name) {
  const std::vector<std::size_t> cats = selected_categories(normalized_name(name));
  if (cats.empty()) return std::nullopt;
  std::vector<CodeRange> out;
  for (std::size_t i = 0; i < N; ++i) {
    if (std::find(cats.begin(), cats.end(), runs[i].category) == cats.end()) continue;
    const char32_t end = i + 1 < N ? runs[i + 1].start - 1 : kMaxCodePoint;
    add_range(out, runs[i].start, end);
  }
  return out;
}

// The code points of `a` not in `b` (both sorted and disjoint).
std::vector<CodeRange> subtract(const std::vector<CodeRange>& a, const std::vector<CodeRange>& b) {
  std::vector<CodeRange> out;
  std::size_t j = 0;
  for (const CodeRange& r : a) {
    char32_t from = r.first;
    while (j < b.size() && b[j].second < from) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first <= r.second; ++k) {
      if (b[k].first > from) add_range(out, from, b[k].first - 1);
      if (b[k].second >= r.second) {
        from = r.second + 1;
        break;
      }
      from = b[k].second + 1;
    }
    if (from <= r.second && from >= r.first) add_range(out, from, r.second);
  }
  return out;
}

}  // namespace

std::optional<std::vector<CodeRange>> category_ranges(std::string_view name) {
  return ranges_of(kCategoryRuns, name);
}

std::optional<CategoryDelta> category_delta_since_14(std::string_view name) {
  const auto now = ranges_of(kCategoryRuns, name);
  const auto then = ranges_of(kCategoryRuns14, name);
  if (!now || !then) return std::nullopt;
  return CategoryDelta{subtract(*now, *then), subtract(*then, *now)};
}

const char* unicode_categories_base_version() { return kUnicodeVersion14; }

}  // namespace detinfer::tokenizer
