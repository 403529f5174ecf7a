#include "tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

namespace {
#include "tokenizer/nfc_tables.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr char32_t kSCount = kLCount * kNCount;

bool unsafe(char32_t cp) {
  const auto it = std::upper_bound(std::begin(kUnsafeRanges), std::end(kUnsafeRanges), cp,
                                   [](char32_t c, const std::uint32_t(&r)[2]) { return c < r[0]; });
  return it != std::begin(kUnsafeRanges) && cp <= (*(it - 1))[1];
}

std::uint32_t ccc(char32_t cp) {
  const auto it = std::lower_bound(std::begin(kCcc), std::end(kCcc), cp,
                                   [](const std::uint32_t(&e)[2], char32_t c) { return e[0] < c; });
  return it != std::end(kCcc) && (*it)[0] == cp ? (*it)[1] : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto it = std::lower_bound(std::begin(kDecomp), std::end(kDecomp), cp,
                                   [](const std::uint32_t(&e)[3], char32_t c) { return e[0] < c; });
  if (it != std::end(kDecomp) && (*it)[0] == cp) {
    for (std::uint32_t k = 0; k < (*it)[2]; ++k) out.push_back(kDecompPool[(*it)[1] + k]);
  } else {
    out.push_back(cp);
  }
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 21) | b;
  const auto it =
      std::lower_bound(std::begin(kCompose), std::end(kCompose), key,
                       [](const std::uint64_t(&e)[2], std::uint64_t k) { return e[0] < k; });
  return it != std::end(kCompose) && (*it)[0] == key ? static_cast<char32_t>((*it)[1]) : 0;
}
}  // namespace

const char* nfc_unicode_version() { return DETINFER_NFC_UNICODE_VERSION; }

std::string nfc(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  bool any_unsafe = false;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) n = 1;  // not reached for validated text
    const char32_t cp = utf8_decode_at(text, i, n);
    any_unsafe = any_unsafe || (cp >= 0x300 && unsafe(cp));
    cps.push_back(cp);
    i += n;
  }
  if (!any_unsafe) return std::string(text);

  // UAX #15: full canonical decomposition, canonical ordering, canonical composition.
  std::vector<char32_t> d;
  d.reserve(cps.size() * 2);
  for (const char32_t cp : cps) decompose(cp, d);
  for (std::size_t i = 1; i < d.size(); ++i) {
    const std::uint32_t c = ccc(d[i]);
    if (c == 0) continue;
    for (std::size_t j = i; j > 0 && ccc(d[j - 1]) > c; --j) std::swap(d[j], d[j - 1]);
  }
  std::vector<char32_t> out;
  out.reserve(d.size());
  std::ptrdiff_t starter = -1;
  std::uint32_t last_cc = 0;
  for (const char32_t c : d) {
    const std::uint32_t cc = ccc(c);
    if (starter >= 0) {
      const bool adjacent = static_cast<std::ptrdiff_t>(out.size()) - 1 == starter;
      if (adjacent || (last_cc != 0 && last_cc < cc)) {
        const char32_t comp = compose(out[static_cast<std::size_t>(starter)], c);
        if (comp != 0) {
          out[static_cast<std::size_t>(starter)] = comp;
          continue;
        }
      }
    }
    if (cc == 0) starter = static_cast<std::ptrdiff_t>(out.size());
    last_cc = cc;
    out.push_back(c);
  }
  std::string s;
  s.reserve(text.size());
  for (const char32_t c : out) append_utf8(s, c);
  return s;
}

}  // namespace detinfer::tokenizer
