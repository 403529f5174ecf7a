#include "tokenizer/unicode_props.h"

#include <string>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::size_t leading_whitespace_bytes(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0 || !is_white_space(utf8_decode_at(s, i, n))) break;
    i += n;
  }
  return i;
}

std::size_t trailing_whitespace_start(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    const std::size_t n = utf8_sequence_length(s, b);
    if (n != end - b || !is_white_space(utf8_decode_at(s, b, n))) break;
    end = b;
  }
  return end;
}

namespace {
bool is_word_char_at(std::string_view s, std::size_t b, std::size_t n) {
  static const Regex word(R"(^[\p{L}\p{N}\p{M}\p{Pc}]$)", false, "word-character regex");
  std::vector<std::pair<std::size_t, std::size_t>> m;
  word.find_all(s.substr(b, n), m);
  return !m.empty();
}
}  // namespace

bool ends_with_word_char(std::string_view s) {
  if (s.empty()) return false;
  std::size_t b = s.size() - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return is_word_char_at(s, b, s.size() - b);
}

bool starts_with_word_char(std::string_view s) {
  if (s.empty()) return false;
  const std::size_t n = utf8_sequence_length(s, 0);
  return n > 0 && is_word_char_at(s, 0, n);
}

}  // namespace detinfer::tokenizer
