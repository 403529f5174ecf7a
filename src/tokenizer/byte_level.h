// GPT-2's reversible byte <-> printable-character mapping used by byte-level BPE.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace detinfer::tokenizer {

// The 256 bytes in GPT-2's vocabulary order: printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// first, then the rest. Byte-level vocabularies (GPT-2, Llama-3, Qwen2) list them in this
// order, so a generated vocabulary does too.
const std::array<std::uint8_t, 256>& byte_level_order();

// Code point that stands for `byte` in a byte-level token (e.g. ' ' -> U+0120 'Ġ').
char32_t byte_to_code_point(std::uint8_t byte);

// The byte a code point stands for, or -1 if the code point is not in the alphabet.
int code_point_to_byte(char32_t cp);

// UTF-8 text of the byte-level character for `byte`.
const std::string& byte_to_char(std::uint8_t byte);

// Maps every byte of `bytes` to its byte-level character.
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace detinfer::tokenizer
