// The few Unicode character properties the tokenizer needs outside PCRE2: Rust's
// char::is_whitespace (White_Space) and a \w test for added tokens with single_word.
#pragma once

#include <cstddef>
#include <string_view>

namespace detinfer::tokenizer {

bool is_white_space(char32_t cp);

// Bytes of leading White_Space characters of `s` (valid UTF-8).
std::size_t leading_whitespace_bytes(std::string_view s);
// Offset where the trailing run of White_Space characters of `s` starts.
std::size_t trailing_whitespace_start(std::string_view s);

// Whether the last / first character of `s` is a word character (\w with Unicode
// properties: letters, numbers, marks, connector punctuation).
bool ends_with_word_char(std::string_view s);
bool starts_with_word_char(std::string_view s);

}  // namespace detinfer::tokenizer
