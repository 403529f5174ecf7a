// libFuzzer target for Tokenizer::encode on arbitrary bytes (docs/tokenizer.md, "Fuzzing").
// Byte 0 picks a tokenizer and a mode; the rest is the text (or, in id mode, ids).
// Checked: no crash, only detinfer::Error(kInvalidArgument) escapes (invalid UTF-8),
// decode(encode(s)) == s for the tiny byte-level tokenizer, encode(decode(ids)) == ids for
// the byte-level fixtures (added tokens with lstrip/rstrip, NFC), streaming == decode.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/tokenizer.h"
#include "devtools/tiny_tokenizer.h"

namespace {

std::string read_fixture(const char* name) {
  std::ifstream in(std::string(DETINFER_FIXTURE_DIR) + "/" + name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Tokenizers {
  std::vector<detinfer::Tokenizer> all;
  Tokenizers() {
    all.push_back(
        detinfer::Tokenizer::from_json(detinfer::devtools::make_tiny_tokenizer_json(512)));
    all.push_back(detinfer::Tokenizer::from_json(read_fixture("byte_level.json")));
    all.push_back(detinfer::Tokenizer::from_json(read_fixture("byte_level_nfc.json")));
    all.push_back(detinfer::Tokenizer::from_json(read_fixture("sentencepiece.json")));
    all.push_back(detinfer::Tokenizer::from_json(read_fixture("sentencepiece_metaspace.json")));
  }
};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void stream_matches(const detinfer::Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  auto d = tok.stream_decoder();
  std::string all;
  for (const auto id : ids) all += d.push(id);
  all += d.flush();
  check(all == tok.decode(ids));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Tokenizers toks;
  if (size == 0) return 0;
  const std::uint8_t sel = data[0];
  const detinfer::Tokenizer& tok = toks.all[sel % toks.all.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((sel & 0x80) != 0) {
    // Id mode: little-endian 16-bit ids, some out of range on purpose.
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
      ids.push_back(static_cast<std::int32_t>(static_cast<std::uint8_t>(text[i]) |
                                              (static_cast<std::uint8_t>(text[i + 1]) << 8)) -
                    8);
    }
    try {
      (void)tok.decode(ids);
    } catch (const detinfer::Error&) {
      return 0;  // out-of-range ids
    }
    stream_matches(tok, ids);
    return 0;
  }
  std::vector<std::int32_t> ids;
  try {
    ids = tok.encode(text, (sel & 0x40) != 0);
  } catch (const detinfer::Error& e) {
    check(e.code() == detinfer::ErrorCode::kInvalidArgument);  // invalid UTF-8 only
    return 0;
  }
  const std::size_t which = sel % toks.all.size();
  if (which == 0) check(tok.decode(tok.encode(text, false)) == text);  // byte-level round trip
  if (which == 1 || which == 2) {
    // Byte-level fixtures have lstrip/rstrip tokens (which drop spaces) and NFC: encoding
    // the decoded text again gives the same ids.
    const auto plain = tok.encode(text, false);
    check(tok.encode(tok.decode(plain), false) == plain);
  }
  stream_matches(tok, ids);
  return 0;
}
