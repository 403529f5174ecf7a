// Hostile tokenizer files (issue 15, crash #1): deep nesting anywhere, 50k nested normalizer
// Sequences, a deeply nested chat_template, duplicate keys, bad UTF-8, huge numbers. Each
// is a clean Error(kCorrupt), from strings and from files, never a stack overflow.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "detinfer/error.h"
#include "detinfer/tokenizer.h"
#include "tokenizer/fixture_files.h"

namespace detinfer {
namespace {

constexpr int kDeep = 100000;

std::string base_json() { return testing::read_fixture("byte_level.json"); }

// `text` with `"key": value,` inserted right after its opening brace.
std::string with_field(const std::string& text, const std::string& key, const std::string& value) {
  const auto brace = text.find('{');
  const bool empty = text.find_first_not_of(" \t\r\n", brace + 1) == text.find('}', brace);
  return text.substr(0, brace + 1) + "\"" + key + "\": " + value + (empty ? "" : ",") +
         text.substr(brace + 1);
}

std::string nested_arrays(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

// {"type": "Sequence", "normalizers": [{"type": "Sequence", ... [] ...}]}
std::string nested_sequences(int depth) {
  std::string out;
  for (int i = 0; i < depth; ++i) out += R"({"type": "Sequence", "normalizers": [)";
  for (int i = 0; i < depth; ++i) out += "]}";
  return out;
}

void expect_corrupt(const std::string& tokenizer_json, const std::string& config_json,
                    const std::string& needle) {
  try {
    Tokenizer::from_json(tokenizer_json, config_json);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << e.what();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
    EXPECT_FALSE(e.field().empty()) << e.what();
  }
}

TEST(TokenizerHostileJson, DeepArraysUnderAnyKey) {
  expect_corrupt(with_field(base_json(), "extra", nested_arrays(kDeep)), "",
                 "tokenizer.json: not valid JSON: nested deeper than 64 levels");
  expect_corrupt(base_json(), with_field("{}", "anything", nested_arrays(kDeep)),
                 "tokenizer_config.json: not valid JSON: nested deeper");
}

TEST(TokenizerHostileJson, FiftyThousandNestedNormalizerSequences) {
  std::string j = base_json();
  const auto pos = j.find("\"normalizer\":");
  ASSERT_NE(pos, std::string::npos);
  j.replace(pos, std::string("\"normalizer\":").size(),
            "\"normalizer\": " + nested_sequences(50000) + ", \"unused_normalizer\":");
  expect_corrupt(j, "", "nested deeper than 64 levels");
}

TEST(TokenizerHostileJson, DeeplyNestedChatTemplate) {
  expect_corrupt(base_json(), with_field("{}", "chat_template", nested_arrays(kDeep)),
                 "nested deeper");
  std::string objects;
  for (int i = 0; i < kDeep; ++i) objects += R"({"a":)";
  objects += "1";
  for (int i = 0; i < kDeep; ++i) objects += "}";
  expect_corrupt(base_json(), with_field("{}", "chat_template", objects), "nested deeper");
}

TEST(TokenizerHostileJson, ModerateNestingStillLoads) {
  // Real files nest a few levels; 40 levels of Sequence (about 80 JSON levels) is too many,
  // 20 (about 41) is fine and builds a working normalizer.
  std::string j = base_json();
  const auto pos = j.find("\"normalizer\":");
  ASSERT_NE(pos, std::string::npos);
  j.replace(pos, std::string("\"normalizer\":").size(),
            "\"normalizer\": " + nested_sequences(20) + ", \"unused_normalizer\":");
  const Tokenizer t = Tokenizer::from_json(j);
  EXPECT_FALSE(t.encode("hello world").empty());
}

TEST(TokenizerHostileJson, DuplicateKeysBadUtf8AndHugeNumbers) {
  expect_corrupt(with_field(base_json(), "decoder", "null"), "", "duplicate key \"decoder\"");
  expect_corrupt(with_field(base_json(), "extra", "\"\xc0\xaf\""), "", "not valid JSON");
  expect_corrupt(with_field(base_json(), "extra", "1e400"), "", "1e400");
  expect_corrupt(base_json() + std::string("\0{}", 3), "", "NUL byte");
  expect_corrupt(base_json(), R"({"eos_token": "a", "eos_token": "b"})", "duplicate key");
}

TEST(TokenizerHostileJson, HostileFilesOnDiskAreCleanErrors) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::filesystem::path dir =
      std::filesystem::path(tmp ? tmp : "/tmp") / "tokenizer_hostile_json_test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  };
  write("tokenizer.json", base_json());
  write("tokenizer_config.json", with_field("{}", "chat_template", nested_arrays(kDeep)));
  try {
    Tokenizer::load(dir.string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << e.what();
    EXPECT_EQ(e.field(), "tokenizer_config.json") << e.what();
  }
  write("tokenizer_config.json", "{}");
  write("tokenizer.json", with_field(base_json(), "extra", nested_arrays(kDeep)));
  try {
    Tokenizer::load(dir.string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << e.what();
    EXPECT_EQ(e.field(), "tokenizer.json") << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace detinfer
