#include "decode/ngram_drafter.h"

#include <algorithm>

namespace detinfer::decode {

namespace {

// The text as one indexable sequence without copying it.
struct Text {
  const std::vector<std::int32_t>& a;
  const std::vector<std::int32_t>& b;
  std::int64_t size() const { return static_cast<std::int64_t>(a.size() + b.size()); }
  std::int32_t operator[](std::int64_t i) const {
    const auto na = static_cast<std::int64_t>(a.size());
    return i < na ? a[static_cast<std::size_t>(i)] : b[static_cast<std::size_t>(i - na)];
  }
};

// The start of the latest occurrence of the last n tokens before the suffix itself, or -1.
std::int64_t latest_match(const Text& t, std::int64_t n) {
  const std::int64_t len = t.size();
  for (std::int64_t start = len - n - 1; start >= 0; --start) {
    std::int64_t k = 0;
    while (k < n && t[start + k] == t[len - n + k]) ++k;
    if (k == n) return start;
  }
  return -1;
}

}  // namespace

void ngram_draft(const std::vector<std::int32_t>& prompt,
                 const std::vector<std::int32_t>& generated, std::int32_t ngram_min,
                 std::int32_t ngram_max, std::int32_t max_tokens, std::vector<std::int32_t>& out) {
  out.clear();
  const Text t{prompt, generated};
  const std::int64_t len = t.size();
  if (max_tokens <= 0 || ngram_min < 1) return;
  for (std::int64_t n = std::min<std::int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const std::int64_t start = latest_match(t, n);
    if (start < 0) continue;
    // The continuation is copied on past the text's end from the proposal itself (the
    // match starts before the suffix, so a repeating pattern repeats on).
    for (std::int64_t i = 0; i < max_tokens; ++i) {
      const std::int64_t at = start + n + i;
      out.push_back(at < len ? t[at] : out[static_cast<std::size_t>(at - len)]);
    }
    return;
  }
}

}  // namespace detinfer::decode
