// Unicode Normalization Form C for the "NFC" normalizer (Qwen2 and others declare it),
// with tables generated from Unicode data (gen_nfc_tables.py -> nfc_tables.inc).
#pragma once

#include <string>
#include <string_view>

namespace detinfer::tokenizer {

// NFC of valid UTF-8 text. Text made only of characters that NFC leaves alone in any
// context (most text) is returned unchanged without decomposing.
std::string nfc(std::string_view text);

// The Unicode version of the tables, e.g. "14.0.0". Hugging Face uses the Rust crate
// unicode-normalization (a newer Unicode): characters assigned after this version can
// normalize differently.
const char* nfc_unicode_version();

}  // namespace detinfer::tokenizer
