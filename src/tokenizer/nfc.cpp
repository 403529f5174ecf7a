#include "tokenizer/nfc.h"

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

// Text below U+0300 is already in NFC and is unchanged by it (no combining marks, no
// composites). Anything else needs the Unicode tables, which this build does not carry.
std::string nfc(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n > 1 && utf8_decode_at(text, i, n) >= 0x300) {
      fail(ErrorCode::kUnsupported, "NFC normalizer: text contains U+",
           static_cast<std::uint32_t>(utf8_decode_at(text, i, n)),
           " and full NFC is not supported");
    }
    i += n == 0 ? 1 : n;
  }
  return std::string(text);
}

}  // namespace detinfer::tokenizer
