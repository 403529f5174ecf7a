// Fixture tokenizers for both BPE families (tests/tokenizer/fixtures/make_fixtures.py).
// <name>.cases.json holds, for each text, the ids and decodes that Hugging Face
// `tokenizers` 0.23 (Rust) gives for <name>.json; the explicit tests below work a few of
// them out by hand from the merge ranks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "detinfer/tokenizer.h"
#include "tokenizer/fixture_files.h"
#include "tokenizer/nfc.h"

namespace detinfer {
namespace {

using testing::fixture_path;
using testing::read_fixture;

using Ids = std::vector<std::int32_t>;

class FixtureCases : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureCases, MatchesHuggingFace) {
  const std::string name = GetParam();
  const Tokenizer tok = Tokenizer::load(fixture_path(name + ".json"));
  const auto cases = nlohmann::json::parse(read_fixture(name + ".cases.json"));
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: '" + text + "'");
    const Ids ids = c["ids"].get<Ids>();
    EXPECT_EQ(tok.encode(text, true), ids);
    EXPECT_EQ(tok.encode(text, false), c["ids_no_special"].get<Ids>());
    EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureCases,
                         ::testing::Values("byte_level", "byte_level_ignore_merges",
                                           "byte_level_nfc", "gpt2_style", "split_behaviors",
                                           "sentencepiece", "sentencepiece_metaspace",
                                           "sentencepiece_metaspace_split",
                                           "byte_level_unicode16"));

// byte_level.json: ids 0..255 are the bytes in GPT-2 order ('H' = 39, 'I' = 40, ' ' = 220
// ('Ġ'), '\n' = 198 ('Ċ')), then one id per merge in rank order: 256 "Ġt", 257 "he",
// 258 "Ġthe", 259 "in", 260 "Ġw", 261 "or", 262 "Ġwor", 263 "ld", 264 "Ġworld", 265 "12",
// 266 "123", 267 "'s", 268 "ĠĠ", 269 "ĠĠĠĠ", 270 "ĊĊ", 271 "He", 272 "ll", 273 "Hell",
// 274 "Hello", 275 "on", 276 "Ġc", 277 "af", 278 "Ġcaf", 279 "ä¸", 280 "中", 281 "Ã©" (é),
// 282 "Ġcafé", 283 "Ġhello" (reachable by no merge); added: 284 <|begin_of_text|>,
// 285 <|end_of_text|>, 286 <|eot_id|> (rstrip), 287 <mask> (lstrip), 288 <sw>, 289 [plain].
class ByteLevelFixture : public ::testing::Test {
 protected:
  Tokenizer tok = Tokenizer::load(fixture_path("byte_level.json"));
};

TEST_F(ByteLevelFixture, AsciiWordsByMergeRank) {
  // Split: "Hello" | " world". "Hello": (H,e) rank 15, (l,l) 16, (He,ll) 17, (Hell,o) 18.
  // " world": (Ġ,w) 4, (o,r) 5, (Ġw,or) 6, (l,d) 7, (Ġwor,ld) 8. BOS from the template.
  EXPECT_EQ(tok.encode("Hello world"), (Ids{284, 274, 264}));
  EXPECT_EQ(tok.encode("Hello world", false), (Ids{274, 264}));
}

TEST_F(ByteLevelFixture, DigitsSplitInGroupsOfThree) {
  // \p{N}{1,3}: "123" "456" "7"; only "123" has merges (1,2) then (12,3).
  EXPECT_EQ(tok.encode("1234567", false), (Ids{266, 19, 20, 21, 22}));
}

TEST_F(ByteLevelFixture, WhitespaceRunsKeepTheLastSpaceForTheWord) {
  // "a   b": \s+(?!\S) takes two spaces ("ĠĠ" = 268), the third goes with "b".
  EXPECT_EQ(tok.encode("a   b", false), (Ids{64, 268, 220, 65}));
  // "\n\n" is one piece (\s*[\r\n]+) merged by (Ċ,Ċ).
  EXPECT_EQ(tok.encode("\n\n", false), (Ids{270}));
}

TEST_F(ByteLevelFixture, ContractionsAreCaseInsensitive) {
  // (?i:'s|...): "'S" is its own piece; there is no merge for "'S" so two bytes.
  EXPECT_EQ(tok.encode("IT'S", false), (Ids{40, 51, 6, 50}));
  EXPECT_EQ(tok.encode("it's", false), (Ids{72, 83, 267}));
}

TEST_F(ByteLevelFixture, CjkAndEmojiAreBytes) {
  // 中 = E4 B8 AD merged by (ä,¸) then (ä¸,Ń); 文 = E6 96 87 has no merges.
  EXPECT_EQ(tok.encode("中", false), (Ids{280}));
  EXPECT_EQ(tok.encode("🙂", false).size(), 4u);
}

TEST_F(ByteLevelFixture, SpecialTokensInsideText) {
  // <|eot_id|> has rstrip: it swallows the spaces after it, so "world" has no "Ġ".
  EXPECT_EQ(tok.encode("Hi<|eot_id|>  world", false), (Ids{39, 72, 286, 86, 261, 263}));
  EXPECT_EQ(tok.decode({284, 274}, true), "Hello");
  EXPECT_TRUE(tok.is_special(284));
  EXPECT_FALSE(tok.is_special(289));
  EXPECT_EQ(tok.token_to_id("<|eot_id|>"), 286);
  EXPECT_EQ(tok.id_to_token(264), std::optional<std::string>("Ġworld"));
  EXPECT_EQ(tok.vocab_size(), 290);
}

TEST(ByteLevelIgnoreMerges, WholeWordInVocabWins) {
  const Tokenizer tok = Tokenizer::load(fixture_path("byte_level_ignore_merges.json"));
  // " hello" is in the vocab (283) though no merge builds it.
  EXPECT_EQ(tok.encode(" hello", false), (Ids{283}));
  const Tokenizer plain = Tokenizer::load(fixture_path("byte_level.json"));
  EXPECT_EQ(plain.encode(" hello", false), (Ids{220, 257, 272, 78}));  // Ġ he ll o
}

// sentencepiece.json: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then "▁" 259,
// a..z 260..285, H 286, T 287, W 288, 中 289, ',' 290, '.' 291, '!' 292, "'" 293, then
// merges: 294 "▁t", 295 "he", 296 "▁the", 297 "▁H", 298 "el", 299 "lo", 300 "▁Hel",
// 301 "▁Hello", 302 "▁w", 303 "or", 304 "ld", 305 "▁wor", 306 "▁world", 307 "▁▁",
// 308 "▁▁▁▁", 309 "in", 310 "▁中".
class SentencePieceFixture : public ::testing::Test {
 protected:
  Tokenizer tok = Tokenizer::load(fixture_path("sentencepiece.json"));
};

TEST_F(SentencePieceFixture, PrependAndReplaceThenMerges) {
  // "▁Hello▁world": (▁,H) 3 -> (e,l) 4 -> (l,o) 5 -> (▁H,el) 6 -> (▁Hel,lo) 7; "▁world" likewise.
  EXPECT_EQ(tok.encode("Hello world"), (Ids{1, 301, 306}));
  EXPECT_EQ(tok.decode({1, 301, 306}, true), "Hello world");
}

TEST_F(SentencePieceFixture, ByteFallbackForUnknownCharacters) {
  // 文 = E6 96 87 is not in the vocab: <0xE6> <0x96> <0x87> = 3 + byte.
  EXPECT_EQ(tok.encode("中文", false), (Ids{310, 3 + 0xE6, 3 + 0x96, 3 + 0x87}));
  EXPECT_EQ(tok.decode({310, 3 + 0xE6, 3 + 0x96, 3 + 0x87}), "中文");
  // An incomplete byte sequence decodes to one U+FFFD per byte token.
  EXPECT_EQ(tok.decode({3 + 0xE6, 3 + 0x96}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_F(SentencePieceFixture, SpecialTokensAndConfig) {
  EXPECT_EQ(tok.encode("<s>Hello</s>", false), (Ids{1, 301, 2}));
  const Tokenizer with_cfg =
      Tokenizer::from_json(read_fixture("sentencepiece.json"),
                           R"({"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>",
          "eos_token": {"content": "</s>", "lstrip": false}, "add_eos_token": true})");
  EXPECT_EQ(with_cfg.bos_token_id(), 1);
  EXPECT_EQ(with_cfg.eos_token_id(), 2);
  EXPECT_EQ(with_cfg.encode("Hello"), (Ids{1, 301, 2}));
  EXPECT_NE(with_cfg.hash(), tok.hash());
}

TEST(NfcFixture, CombiningCharactersAreComposedFirst) {
  // byte_level_nfc.json (Qwen2 style: NFC, digits one by one). "cafe" + U+0301 becomes
  // "café" (U+00E9), so both spellings give " caf" + "é" -> "Ġcafé" (282).
  const Tokenizer tok = Tokenizer::load(fixture_path("byte_level_nfc.json"));
  EXPECT_EQ(tok.encode(" cafe\xCC\x81", false), (Ids{282}));
  EXPECT_EQ(tok.encode(" caf\xC3\xA9", false), (Ids{282}));
  EXPECT_EQ(tok.encode("123", false), (Ids{16, 17, 18}));
}

TEST(Nfc, MatchesPythonUnicodedataOnGeneratedCases) {
  const auto j = nlohmann::json::parse(read_fixture("nfc_cases.json"));
  ASSERT_EQ(j["unicode"].get<std::string>(), tokenizer::nfc_unicode_version());
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(tokenizer::nfc(c[0].get<std::string>()), c[1].get<std::string>())
        << c[0].get<std::string>();
  }
  EXPECT_EQ(tokenizer::nfc("plain ascii"), "plain ascii");
}

}  // namespace
}  // namespace detinfer
