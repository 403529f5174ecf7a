// Malformed or unsupported tokenizer.json and bad inputs: clear errors, never a crash.
#include "detinfer/error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detinfer/tokenizer.h"
#include "devtools/tiny_tokenizer.h"
#include "tokenizer/fixture_files.h"

namespace detinfer {
namespace {

using nlohmann::json;

json fixture(const std::string& name) { return json::parse(testing::read_fixture(name)); }

// Expects from_json(j) to throw `code` with `needle` in the message.
void expect_error(const json& j, ErrorCode code, const std::string& needle) {
  try {
    Tokenizer::from_json(j.dump());
    ADD_FAILURE() << "no error; expected " << to_string(code) << " with '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, InvalidJson) {
  try {
    Tokenizer::from_json("{\"model\": ");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_NE(e.message().find("not valid JSON"), std::string::npos);
  }
  EXPECT_THROW(Tokenizer::from_json("[1, 2]"), Error);
  EXPECT_THROW(Tokenizer::from_json(fixture("byte_level.json").dump(), "{oops"), Error);
}

TEST(TokenizerErrors, MissingModel) {
  json j = fixture("byte_level.json");
  j.erase("model");
  expect_error(j, ErrorCode::kCorrupt, "missing field 'model'");
}

TEST(TokenizerErrors, MergeWithUnknownToken) {
  json j = fixture("byte_level.json");
  j["model"]["merges"].push_back("Ġ nosuchtoken");
  expect_error(j, ErrorCode::kCorrupt, "'nosuchtoken' is not in the vocab");
  json k = fixture("byte_level_ignore_merges.json");
  k["model"]["merges"].push_back(json::array({"a", "b", "c"}));
  expect_error(k, ErrorCode::kCorrupt, "merges[");
}

TEST(TokenizerErrors, DuplicateIds) {
  json j = fixture("byte_level.json");
  j["model"]["vocab"]["zzz"] = 5;
  expect_error(j, ErrorCode::kCorrupt, "duplicate id 5");
  json k = fixture("byte_level.json");
  k["added_tokens"][1]["id"] = k["added_tokens"][0]["id"];
  expect_error(k, ErrorCode::kCorrupt, "duplicate id");
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  json a = fixture("byte_level.json");
  a["model"]["type"] = "WordPiece";
  expect_error(a, ErrorCode::kUnsupported, "WordPiece");
  json b = fixture("byte_level.json");
  b["normalizer"] = {{"type", "Lowercase"}};
  expect_error(b, ErrorCode::kUnsupported, "normalizer 'Lowercase'");
  json c = fixture("byte_level.json");
  c["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}};
  expect_error(c, ErrorCode::kUnsupported, "pre_tokenizer 'Whitespace'");
  json d = fixture("sentencepiece.json");
  d["decoder"]["decoders"][0] = {{"type", "WordPiece"}};
  expect_error(d, ErrorCode::kUnsupported, "decoder 'WordPiece'");
  json e = fixture("byte_level.json");
  e["model"]["dropout"] = 0.1;
  expect_error(e, ErrorCode::kUnsupported, "dropout");
  json f = fixture("byte_level.json");
  f["truncation"] = {{"max_length", 8}};
  expect_error(f, ErrorCode::kUnsupported, "truncation");
  json g = fixture("byte_level.json");
  g["post_processor"] = {{"type", "Mystery"}};
  expect_error(g, ErrorCode::kUnsupported, "post_processor 'Mystery'");
}

TEST(TokenizerErrors, BadRegexIsCorrupt) {
  json j = fixture("byte_level.json");
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_error(j, ErrorCode::kCorrupt, "does not compile");
}

TEST(TokenizerErrors, OutOfRangeIdsInDecode) {
  const Tokenizer tok = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  for (const std::int32_t bad : {-1, 512, 1 << 30}) {
    try {
      tok.decode({1, bad});
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(e.message().find(std::to_string(bad)), std::string::npos);
    }
    auto d = tok.stream_decoder();
    EXPECT_THROW(d.push(bad), Error);
  }
}

TEST(TokenizerErrors, InvalidUtf8InputIsRejected) {
  // Documented behaviour: encode() takes UTF-8 text (as Hugging Face's str); anything
  // else is Error(kInvalidArgument) naming the byte offset.
  const Tokenizer tok = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(512));
  for (const std::string& bad :
       {std::string("ab\xFF"), std::string("\xC3"), std::string("\xED\xA0\x80"),
        std::string("x\xC0\xAF"), std::string("\xF4\x90\x80\x80")}) {
    try {
      tok.encode(bad);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(e.message().find("not valid UTF-8"), std::string::npos);
    }
  }
}

TEST(TokenizerErrors, MissingFile) {
  try {
    Tokenizer::load("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(TokenizerHash, CanonicalJsonAndConfigFields) {
  const json j = fixture("byte_level.json");
  const Tokenizer a = Tokenizer::from_json(j.dump());
  const Tokenizer b = Tokenizer::from_json(j.dump(4));  // other whitespace, same content
  EXPECT_EQ(a.hash(), b.hash());
  json changed = j;
  changed["model"]["merges"].erase(changed["model"]["merges"].end() - 1);
  EXPECT_NE(Tokenizer::from_json(changed.dump()).hash(), a.hash());
  const Tokenizer c = Tokenizer::from_json(j.dump(), R"({"eos_token": "<|end_of_text|>"})");
  EXPECT_NE(c.hash(), a.hash());
  EXPECT_EQ(c.eos_token_id(), 285);
  // Fields that do not affect tokenization do not change the hash.
  const Tokenizer d =
      Tokenizer::from_json(j.dump(), R"({"eos_token": "<|end_of_text|>", "model_max_length": 77})");
  EXPECT_EQ(d.hash(), c.hash());
  EXPECT_EQ(a.hash().hex().size(), 32u);
}

}  // namespace
}  // namespace detinfer
