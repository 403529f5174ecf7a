// Tokenizer::max_text_bytes_per_token (issue 33): the bound on which a chat request is
// refused as too long before it is tokenized. Where a bound is given, no token of
// encode(text) stands for more bytes of the text, so a text has at least ceil(bytes /
// bound) tokens (checked on random texts); where a stage can shrink or drop text there
// is no bound (0).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detinfer/tokenizer.h"
#include "devtools/tiny_tokenizer.h"
#include "tokenizer/fixture_files.h"
#include "tokenizer/random_text.h"

namespace detinfer {
namespace {

using nlohmann::json;

// At least ceil(size / bound) tokens for each random text, and (byte-level) no token
// decodes to more than `bound` bytes.
void expect_bound_holds(const Tokenizer& tok, std::size_t bound, bool byte_level) {
  ASSERT_GT(bound, 0u);
  for (std::uint64_t i = 0; i < 3000; ++i) {
    const std::string s = testing::random_utf8(0xb0b, i, 1 + static_cast<int>(i % 200));
    const std::vector<std::int32_t> ids = tok.encode(s, false);
    ASSERT_GE(ids.size() * bound, s.size()) << "text #" << i;
    for (std::size_t k = 0; byte_level && k < ids.size(); ++k) {
      ASSERT_LE(tok.decode({ids[k]}).size(), bound) << "text #" << i;
    }
  }
  // Long runs that merge into the longest tokens: the same letter, spaces, digits.
  for (const char c : {'a', ' ', '7', '\n'}) {
    const std::string s(5000, c);
    ASSERT_GE(tok.encode(s, false).size() * bound, s.size()) << "run of '" << c << "'";
  }
}

TEST(TextBytesBound, TinyByteLevelTokenizerHasOneAndItHolds) {
  const Tokenizer tiny = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  const std::size_t bound = tiny.max_text_bytes_per_token();
  expect_bound_holds(tiny, bound, true);
}

TEST(TextBytesBound, SentencePieceWithAFullByteFallbackHasOneAndItHolds) {
  const Tokenizer sp = Tokenizer::from_json(testing::read_fixture("sentencepiece_metaspace.json"));
  expect_bound_holds(sp, sp.max_text_bytes_per_token(), false);
}

TEST(TextBytesBound, NoBoundWhereAStageMayShrinkOrDropText) {
  const json tiny = json::parse(devtools::make_tiny_tokenizer_json(512));
  ASSERT_GT(Tokenizer::from_json(tiny.dump()).max_text_bytes_per_token(), 0u);
  json nfc = tiny;  // NFC composes: fewer bytes than the input
  nfc["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(Tokenizer::from_json(nfc.dump()).max_text_bytes_per_token(), 0u);
  json removed = tiny;  // a Split that removes its matches
  removed["pre_tokenizer"]["pretokenizers"].insert(
      removed["pre_tokenizer"]["pretokenizers"].begin(), json{{"type", "Split"},
                                                              {"pattern", {{"String", " "}}},
                                                              {"behavior", "Removed"},
                                                              {"invert", false}});
  EXPECT_EQ(Tokenizer::from_json(removed.dump()).max_text_bytes_per_token(), 0u);
  json lstrip = tiny;  // an added token that takes the whitespace before it
  ASSERT_FALSE(lstrip["added_tokens"].empty());
  lstrip["added_tokens"][0]["lstrip"] = true;
  EXPECT_EQ(Tokenizer::from_json(lstrip.dump()).max_text_bytes_per_token(), 0u);
  // The fixtures with a normalizer, or with stripping added tokens.
  for (const char* name : {"byte_level_nfc.json", "sentencepiece.json", "split_behaviors.json",
                           "gpt2_style.json", "byte_level.json"}) {
    EXPECT_EQ(Tokenizer::from_json(testing::read_fixture(name)).max_text_bytes_per_token(), 0u)
        << name;
  }
}

}  // namespace
}  // namespace detinfer
