// Random valid UTF-8 for property tests, drawn from Philox (seeded, reproducible).
#pragma once

#include <cstdint>
#include <string>

#include "detinfer/philox.h"
#include "tokenizer/utf8.h"

namespace detinfer::testing {

// String number `index` of a reproducible family: 0..max_chars code points mixing ASCII,
// whitespace, Latin-1, combining marks, Cyrillic, CJK, emoji and any other scalar value.
inline std::string random_utf8(std::uint64_t seed, std::uint64_t index, int max_chars = 40) {
  std::string s;
  const int n = static_cast<int>(philox_bits(seed, index, 0, 0) % (max_chars + 1));
  for (int i = 0; i < n; ++i) {
    const PhiloxCounter r = philox_block(seed, index, 1 + i);
    std::uint32_t cp = 0;
    switch (r[0] % 9) {
      case 0:
      case 1:
        cp = 0x20 + r[1] % 0x5F;  // printable ASCII
        break;
      case 2:
        cp = " \t\n\r  "[r[1] % 6];
        break;
      case 3:
        cp = 0xA0 + r[1] % 0x160;  // Latin-1 and Latin Extended
        break;
      case 4:
        cp = 0x300 + r[1] % 0x70;  // combining marks
        break;
      case 5:
        cp = 0x400 + r[1] % 0x100;  // Cyrillic
        break;
      case 6:
        cp = 0x4E00 + r[1] % 0x5200;  // CJK
        break;
      case 7:
        cp = 0x1F300 + r[1] % 0x300;  // emoji
        break;
      default:
        cp = r[1] % 0x10F800;  // any scalar value (surrogates skipped below)
        if (cp >= 0xD800) cp += 0x800;
        break;
    }
    tokenizer::append_utf8(s, static_cast<char32_t>(cp));
  }
  return s;
}

}  // namespace detinfer::testing
