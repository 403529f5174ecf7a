// Small UTF-8 helpers for the tokenizer (decoding one code point, validation, encoding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8_append.h"

namespace detinfer::tokenizer {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if it is not well formed
// (overlong, surrogate, > U+10FFFF, truncated, stray continuation byte).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

// Offset of the first byte that does not start a well-formed sequence, or npos.
std::size_t find_invalid_utf8(std::string_view s);

// Decodes the well-formed sequence of `len` bytes at s[i].
char32_t utf8_decode_at(std::string_view s, std::size_t i, std::size_t len);

using core::append_utf8;

// Length in bytes of the trailing part of `s` that is a proper prefix of a well-formed
// sequence (0..3): the bytes a streaming decoder must hold back.
std::size_t utf8_incomplete_tail(std::string_view s);

// Rust's String::from_utf8_lossy: each maximal ill-formed subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace detinfer::tokenizer
