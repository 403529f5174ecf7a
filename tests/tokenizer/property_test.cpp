// Round trip and streaming properties on many random inputs.
#include <gtest/gtest.h>

#include "detinfer/philox.h"
#include "detinfer/tokenizer.h"
#include "devtools/tiny_tokenizer.h"
#include "tokenizer/fixture_files.h"
#include "tokenizer/random_text.h"
#include "tokenizer/utf8.h"

namespace detinfer {
namespace {

using testing::read_fixture;
std::string fixture(const std::string& name) { return read_fixture(name); }

TEST(RoundTrip, ByteLevelDecodeOfEncodeIsIdentityOn10000RandomStrings) {
  const Tokenizer tiny = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  const Tokenizer fix = Tokenizer::from_json(fixture("byte_level.json"));
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const std::string s = testing::random_utf8(0x5eed, i);
    ASSERT_EQ(tiny.decode(tiny.encode(s, false)), s) << "string #" << i;
    ASSERT_EQ(fix.decode(fix.encode(s, true), true), s) << "string #" << i;
  }
}

TEST(RoundTrip, SentencePieceWithByteFallbackOnRandomStrings) {
  // Prepend("▁") + Strip(1) give back the text when it does not start with a space.
  const Tokenizer sp = Tokenizer::from_json(fixture("sentencepiece.json"));
  for (std::uint64_t i = 0; i < 2000; ++i) {
    const std::string s = "x" + testing::random_utf8(0x5eed, i);
    ASSERT_EQ(sp.decode(sp.encode(s, true), true), s) << "string #" << i;
  }
}

TEST(RoundTrip, SpecialTokensSurviveInsideText) {
  const Tokenizer tiny = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  const std::string s = "<|im_start|>user\nhello<|im_end|>\n<|endoftext|>";
  const auto ids = tiny.encode(s, false);
  const devtools::TinySpecialIds sp = devtools::tiny_special_ids(512);
  EXPECT_EQ(ids.front(), sp.im_start);
  EXPECT_EQ(ids.back(), sp.endoftext);
  EXPECT_EQ(tiny.decode(ids), s);
  EXPECT_EQ(tiny.decode(ids, true), "user\nhello\n");
}

void check_stream(const Tokenizer& tok, const std::vector<std::int32_t>& ids, bool skip) {
  Tokenizer::StreamDecoder d = tok.stream_decoder(skip);
  std::string all;
  for (const std::int32_t id : ids) {
    const std::string piece = d.push(id);
    // Only well-formed UTF-8 is ever emitted.
    ASSERT_EQ(tokenizer::find_invalid_utf8(piece), std::string::npos);
    all += piece;
  }
  all += d.flush();
  ASSERT_EQ(all, tok.decode(ids, skip));
}

TEST(Streaming, ConcatenationEqualsDecodeForRandomIdSequences) {
  const std::vector<std::string> jsons = {devtools::make_tiny_tokenizer_json(512),
                                          fixture("byte_level.json"), fixture("sentencepiece.json"),
                                          fixture("sentencepiece_metaspace.json")};
  for (std::size_t t = 0; t < jsons.size(); ++t) {
    const Tokenizer tok = Tokenizer::from_json(jsons[t]);
    for (std::uint64_t seq = 0; seq < 1000; ++seq) {
      const std::uint32_t n = philox_bits(77, seq, 0, 0) % 24;
      std::vector<std::int32_t> ids;
      for (std::uint32_t k = 0; k < n; ++k) {
        ids.push_back(static_cast<std::int32_t>(philox_bits(77 + t, seq, 1 + k, 1) %
                                                static_cast<std::uint32_t>(tok.vocab_size())));
      }
      SCOPED_TRACE("tokenizer " + std::to_string(t) + " sequence " + std::to_string(seq));
      check_stream(tok, ids, false);
      check_stream(tok, ids, true);
    }
  }
}

TEST(Streaming, EncodedTextStreamsBackWithOnlyCompleteCharacters) {
  const Tokenizer tok = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  for (std::uint64_t i = 0; i < 300; ++i) {
    const std::string s = testing::random_utf8(99, i);
    const auto ids = tok.encode(s, false);
    Tokenizer::StreamDecoder d = tok.stream_decoder();
    std::string all;
    for (const auto id : ids) {
      const std::string piece = d.push(id);
      // Every piece of a valid text's decode is itself valid: it never splits a character.
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos);
      all += piece;
    }
    EXPECT_EQ(d.flush(), "");
    EXPECT_EQ(all, s);
  }
}

TEST(Streaming, HoldsAPartialCharacterUntilItCompletes) {
  const Tokenizer tok = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  // 中 (E4 B8 AD) is not in the tiny corpus' merges: three byte tokens.
  const auto ids = tok.encode("中", false);
  ASSERT_EQ(ids.size(), 3u);
  Tokenizer::StreamDecoder d = tok.stream_decoder();
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "中");
  EXPECT_EQ(d.flush(), "");
  // A character cut off at the end comes out of flush() as decode() gives it.
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace detinfer
