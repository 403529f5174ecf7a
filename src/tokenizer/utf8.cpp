#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

namespace {
inline bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Number of bytes of s[i..] that form a maximal prefix of a well-formed sequence
// (Unicode "maximal subpart"), and whether the whole sequence is complete.
std::size_t valid_prefix(std::string_view s, std::size_t i, bool* complete) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  *complete = false;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c0 < 0x80) {
    *complete = true;
    return 1;
  } else if (c0 >= 0xC2 && c0 <= 0xDF) {
    need = 2;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    need = 3;
    if (c0 == 0xE0) lo = 0xA0;
    if (c0 == 0xED) hi = 0x9F;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    need = 4;
    if (c0 == 0xF0) lo = 0x90;
    if (c0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  std::size_t n = 1;
  while (n < need && i + n < s.size()) {
    const auto c = static_cast<unsigned char>(s[i + n]);
    if (n == 1 ? (c < lo || c > hi) : !is_cont(c)) break;
    ++n;
  }
  *complete = n == need;
  return n;
}
}  // namespace

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  bool complete = false;
  const std::size_t n = valid_prefix(s, i, &complete);
  return complete ? n : 0;
}

std::size_t find_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

char32_t utf8_decode_at(std::string_view s, std::size_t i, std::size_t len) {
  const auto b = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]));
  };
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

std::size_t utf8_incomplete_tail(std::string_view s) {
  // A lead byte at most 3 bytes from the end whose valid prefix runs to the end.
  for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const std::size_t i = s.size() - back;
    const auto c = static_cast<unsigned char>(s[i]);
    if (is_cont(c)) continue;
    bool complete = false;
    const std::size_t n = valid_prefix(s, i, &complete);
    return (!complete && n == back) ? back : 0;
  }
  return 0;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    bool complete = false;
    const std::size_t n = valid_prefix(bytes, i, &complete);
    if (complete) {
      out.append(bytes.data() + i, n);
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += n == 0 ? 1 : n;
    }
  }
  return out;
}

}  // namespace detinfer::tokenizer
