// Unicode Normalization Form C for the "NFC" normalizer (Qwen2 and others declare it).
#pragma once

#include <string>
#include <string_view>

namespace detinfer::tokenizer {

// NFC of valid UTF-8 text.
std::string nfc(std::string_view text);

}  // namespace detinfer::tokenizer
