// Each tokenizer.ggml.pre name detinfer maps, on one byte-level vocabulary (the byte_level
// fixture: merges "1 2", "12 3", "' s", "h e", "l l", "é" and a " hello" token that only
// ignore_merges reaches): texts whose split differs between the names give the tokens
// worked out by hand from the names' regexes (docs/gguf.md, "Tokenizers").
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "gguf_tokenizer_support.h"

namespace detinfer::model {
namespace {

using Pieces = std::vector<std::string>;

// The text of each token of encode(text), decoded one by one.
Pieces pieces(const Tokenizer& t, const std::string& text) {
  Pieces out;
  for (const std::int32_t id : t.encode(text, false)) out.push_back(t.decode({id}));
  return out;
}

Tokenizer with_pre(const std::string& pre) {
  GgufFile f =
      testing::gguf_of(testing::read_tokenizer_fixture("byte_level.json"), "", "smaug-bpe");
  f.metadata["tokenizer.ggml.pre"] = testing::string_value(pre);
  return gguf_tokenizer(f);
}

const std::string kReplacement = "\xEF\xBF\xBD";
const std::string kDecomposedE = "e\xCC\x81";  // e + U+0301
const Pieces kDigits3 = {"12", "1", "2"};      // "1212": digit groups of 1-3
const Pieces kDigitsRun = {"12", "12"};        // "1212": one run of digits
const Pieces kDigits1 = {"1", "2", "1", "2"};  // "1212": single digits
const Pieces kHelloWhole = {" hello"};         // ignore_merges: the word is a token
const Pieces kHelloMerged = {" ", "he", "ll", "o"};
const Pieces kComposed = {"\xC3\xA9"};  // NFC made é, one token
const Pieces kDecomposed = {"e", kReplacement, kReplacement};
const Pieces kContraction = {"i", "t", "'s"};
const Pieces kPunctFirst = {"i", "t", "'", "s"};  // "default" isolates punctuation first

struct Expected {
  Pieces digits, hello, accent, its;
};

TEST(GgufPreTokenizer, EveryNameSplitsAsItsRegexes) {
  const std::map<std::string, Expected> table = {
      {"llama3", {kDigits3, kHelloWhole, kDecomposed, kContraction}},
      {"llama-v3", {kDigits3, kHelloWhole, kDecomposed, kContraction}},
      {"llama-bpe", {kDigits3, kHelloWhole, kDecomposed, kContraction}},
      {"dbrx", {kDigits3, kHelloMerged, kDecomposed, kContraction}},
      {"smaug-bpe", {kDigits3, kHelloMerged, kDecomposed, kContraction}},
      {"qwen2", {kDigits1, kHelloMerged, kComposed, kContraction}},
      {"gpt-2", {kDigitsRun, kHelloMerged, kDecomposed, kContraction}},
      {"phi-2", {kDigitsRun, kHelloMerged, kDecomposed, kContraction}},
      {"olmo", {kDigitsRun, kHelloMerged, kDecomposed, kContraction}},
      {"smollm", {kDigits1, kHelloMerged, kDecomposed, kContraction}},
      {"default", {kDigits3, kHelloMerged, kDecomposed, kPunctFirst}},
  };
  ASSERT_EQ(table.size(), gguf_pre_tokenizer_names().size());
  for (const std::string& name : gguf_pre_tokenizer_names()) {
    const Expected& e = table.at(name);
    const Tokenizer t = with_pre(name);
    EXPECT_EQ(pieces(t, "1212"), e.digits) << name;
    EXPECT_EQ(pieces(t, " hello"), e.hello) << name;
    EXPECT_EQ(pieces(t, kDecomposedE), e.accent) << name;
    EXPECT_EQ(pieces(t, "it's"), e.its) << name;
  }
}

TEST(GgufPreTokenizer, Llama3FamilyAddsBosUnlessTheFileSaysOtherwise) {
  GgufFile f =
      testing::gguf_of(testing::read_tokenizer_fixture("byte_level.json"), "", "smaug-bpe");
  f.metadata.erase("tokenizer.ggml.add_bos_token");
  EXPECT_EQ(gguf_tokenizer(f).encode("a", true).size(), 1u);  // dbrx family: no BOS
  f.metadata["tokenizer.ggml.pre"] = testing::string_value("llama-bpe");
  const Tokenizer t = gguf_tokenizer(f);
  EXPECT_EQ(t.encode("a", true).front(), 284);  // <|begin_of_text|>
  f.metadata["tokenizer.ggml.add_bos_token"] = testing::bool_value(false);
  EXPECT_EQ(gguf_tokenizer(f).encode("a", true).size(), 1u);
}

TEST(GgufPreTokenizer, UnknownNameIsUnsupportedNamingIt) {
  try {
    with_pre("deepseek-llm");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.field(), "tokenizer.ggml.pre");
    EXPECT_NE(std::string(e.what()).find("deepseek-llm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace detinfer::model

namespace detinfer::model {
namespace {

// Every split of a vocabulary token into two vocabulary tokens, highest merged score first;
// equal scores: longer left piece, longer right piece, lower ids. Splits fall on character
// boundaries only, and tokens outside the vocabulary (added tokens) take no part.
TEST(GgufSpmMerges, AllSplitsRankedByTheMergedTokensScore) {
  const std::vector<std::string> tokens = {"a",        "b",         "c",   "ab",   "bc",  "abc",
                                           "\xC3\xA9", "a\xC3\xA9", "<s>", "<s>a", "cab", "ca"};
  const std::vector<double> scores = {0, 0, 0, -2, -1, -3, 0, -4, 0, -0.5, -3, -9};
  std::vector<bool> in_vocab(tokens.size(), true);
  in_vocab[8] = false;  // "<s>": an added token
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(gguf_spm_merges(tokens, scores, in_vocab),
            (std::vector<P>{{"b", "c"},
                            {"a", "b"},
                            {"ab", "c"},  // "abc" -3: longer left piece first
                            {"ca", "b"},  // "cab" -3: longer left than "a bc"
                            {"a", "bc"},  // then "abc" (id 5) before "cab" (id 10)
                            {"c", "ab"},
                            {"a", "\xC3\xA9"},
                            {"c", "a"}}));
}

std::vector<std::string> chain(int n) {  // "x", "xx", ...: each splits into every shorter pair
  std::vector<std::string> tokens;
  for (int i = 1; i <= n; ++i) tokens.push_back(std::string(static_cast<std::size_t>(i), 'x'));
  return tokens;
}

TEST(GgufSpmMerges, LongChainsGiveEveryMerge) {
  const std::vector<std::string> tokens = chain(500);
  std::vector<double> scores(tokens.size());
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<double>(i);
  const auto merges = gguf_spm_merges(tokens, scores, std::vector<bool>(tokens.size(), true));
  EXPECT_EQ(merges.size(), 499u * 500u / 2u);
  EXPECT_EQ(merges.front(), (std::pair<std::string, std::string>{"x", "x"}));
}

// 2,000 chained tokens imply ~2.7 GB of merges: refused at the 128 MiB that
// Tokenizer::from_json could read, before that memory is spent.
TEST(GgufSpmMerges, MoreThan128MiBOfMergesIsCorrupt) {
  const std::vector<std::string> tokens = chain(2000);
  try {
    gguf_spm_merges(tokens, std::vector<double>(tokens.size(), 0.0),
                    std::vector<bool>(tokens.size(), true));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.field(), "tokenizer.ggml.tokens");
  }
}

}  // namespace
}  // namespace detinfer::model
