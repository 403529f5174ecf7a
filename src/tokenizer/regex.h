// PCRE2 (UTF + UCP, JIT when available) for the pre-tokenizer patterns of tokenizer.json:
// they use \p{L}, \p{N}, lookahead and case-insensitive groups.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace detinfer::tokenizer {

class Regex {
 public:
  // `literal`: the pattern is a plain string (tokenizer.json's {"String": ...}).
  // Throws Error(kCorrupt) naming `what` when the pattern does not compile.
  Regex(const std::string& pattern, bool literal, std::string_view what);

  // Half-open byte ranges of the non-empty matches in `text`, left to right, without
  // overlap (as Oniguruma's find_iter, which Hugging Face uses: an empty match moves
  // the search one character on). `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

  bool jit() const { return jit_; }
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  bool jit_ = false;
  std::string pattern_;
};

}  // namespace detinfer::tokenizer

namespace detinfer::tokenizer {
// Replaces every non-empty match of `re` in `text` with `content`.
std::string regex_replace_all(const Regex& re, std::string_view text, std::string_view content);
}  // namespace detinfer::tokenizer
