// core::parse_json and core::read_file_bounded: every hostile input is a clean Error.
#include "core/json_parse.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace detinfer::core {
namespace {

// Expects parse_json(text) to throw `code` with `needle` in the message and field "doc".
void expect_rejected(const std::string& text, const std::string& needle,
                     const JsonLimits& limits = JsonLimits(),
                     ErrorCode code = ErrorCode::kCorrupt) {
  try {
    parse_json(text, limits, code, "doc");
    ADD_FAILURE() << "accepted: " << text.substr(0, 80);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.field(), "doc");
    EXPECT_EQ(e.message().rfind("doc: not valid JSON: ", 0), 0u) << e.what();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
  }
}

TEST(JsonReader, ParsesValidJson) {
  const nlohmann::json j = parse_json(R"( {"a": [1, 2.5, "x\u00e9", null, true], "b": {"c": {}}} )",
                                      JsonLimits(), ErrorCode::kCorrupt, "doc");
  EXPECT_EQ(j["a"][0], 1);
  EXPECT_EQ(j["a"][1], 2.5);
  EXPECT_EQ(j["a"][2], "x\xc3\xa9");
  EXPECT_TRUE(j["b"]["c"].is_object());
  // Exactly max_depth levels is fine; the same key in two different objects is fine.
  JsonLimits limits;
  limits.max_depth = 3;
  EXPECT_NO_THROW(parse_json(R"({"k": [{"k": 1}]})", limits, ErrorCode::kCorrupt, "doc"));
  EXPECT_NO_THROW(parse_json(R"("\"[[[[")", limits, ErrorCode::kCorrupt, "doc"));
}

// Random JSON text (fixed seed): nested arrays and objects of every scalar kind.
std::string random_json(std::uint64_t& state, int depth) {
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(state >> 33);
  };
  const std::uint32_t kind = depth >= 6 ? next() % 6 : next() % 8;
  const std::uint32_t n = next() % 5;
  std::string out;
  switch (kind) {
    case 0:
      return "null";
    case 1:
      return next() % 2 ? "true" : "false";
    case 2:
      return std::to_string(static_cast<std::int64_t>(next()) - (1 << 30));
    case 3:
      return std::to_string(next()) + "." + std::to_string(next() % 1000) + "e-3";
    case 4:
      return "18446744073709551615";
    case 5:
      return "\"s" + std::to_string(next() % 50) + "\\u00e9\"";
    case 6:
      out = "[";
      for (std::uint32_t i = 0; i < n; ++i) out += (i ? "," : "") + random_json(state, depth + 1);
      return out + "]";
    default:
      out = "{";
      for (std::uint32_t i = 0; i < n; ++i) {
        out += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + random_json(state, depth + 1);
      }
      return out + "}";
  }
}

TEST(JsonReader, BuildsTheSameValueAsNlohmann) {
  std::uint64_t state = 20261203;
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_json(state, 0);
    EXPECT_EQ(parse_json(text, JsonLimits(), ErrorCode::kCorrupt, "doc"),
              nlohmann::json::parse(text))
        << text;
  }
}

// An array of many objects is parsed in one linear pass. (nlohmann's callback parser,
// used before, rescanned the array at every object's end: 50,000 objects took 2.5 s, and
// the 400,000 here would take minutes, past the test's timeout. bench_tokenizer's
// BM_ParseJsonObjects reports the per-object cost at two sizes.)
TEST(JsonReader, ManyObjectsInOneArray) {
  std::string text = "[";
  for (int i = 0; i < 400000; ++i) text += i ? ",{\"id\":1}" : "{\"id\":1}";
  text += "]";
  const nlohmann::json j = parse_json(text, JsonLimits(), ErrorCode::kCorrupt, "doc");
  ASSERT_EQ(j.size(), 400000u);
  EXPECT_EQ(j[399999]["id"], 1);
}

TEST(JsonReader, RejectsSyntaxErrorsWithTheirByteOffset) {
  expect_rejected("", "at byte 0");
  expect_rejected("{\"a\": ", "at byte 6");
  expect_rejected("{\"a\": 1} trailing", "at byte 11");
  expect_rejected("{\"a\": 1} // comment", "at byte");
  expect_rejected("[1, 2,]", "at byte");
  expect_rejected("{'a': 1}", "at byte 1");
}

TEST(JsonReader, ANulByteEndsNothing) {
  expect_rejected(std::string("{\"a\": 1}\0{\"b\": 2}", 17), "NUL byte at byte 8");
  expect_rejected(std::string("\"a\\\0\"", 5), "NUL byte at byte 3");
}

TEST(JsonReader, RejectsDeepNestingWithoutRecursing) {
  expect_rejected(std::string(100000, '['), "nested deeper than 64 levels at byte 64");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  expect_rejected(objects, "nested deeper than 64 levels");
  JsonLimits limits;
  limits.max_depth = 3;
  expect_rejected("[[[[1]]]]", "nested deeper than 3 levels at byte 3", limits);
  // Brackets inside strings do not count.
  EXPECT_NO_THROW(
      parse_json("[\"" + std::string(1000, '[') + "\"]", limits, ErrorCode::kCorrupt, "doc"));
}

TEST(JsonReader, DeepNestingAtEveryScaleIsRejectedByBothReaders) {
  for (const std::size_t depth :
       {std::size_t{1000}, std::size_t{10000}, std::size_t{100000}, std::size_t{1000000}}) {
    const std::string text = std::string(depth, '[') + std::string(depth, ']');
    expect_rejected(text, "nested deeper than 64 levels at byte 64");
    EXPECT_THROW(parse_json_ordered(text, JsonLimits(), ErrorCode::kCorrupt, "doc"), Error);
    // The scan stops once past the limit, also on text that is not JSON.
    EXPECT_EQ(json_nesting_depth(text, 64), 65);
    EXPECT_EQ(json_nesting_depth(std::string(depth, '{'), 1 << 30),
              static_cast<std::int64_t>(depth));
  }
  EXPECT_EQ(json_nesting_depth(R"({"a": ["[[[", {"b": []}]})", 64), 4);
  EXPECT_EQ(json_nesting_depth("1", 64), 0);
}

TEST(JsonReader, OrderedReaderKeepsDocumentOrderWithTheSameRules) {
  const nlohmann::ordered_json j =
      parse_json_ordered(R"({"zeta": 1, "alpha": {"y": [true, null], "b": "x"}, "mid": 2.5})",
                         JsonLimits(), ErrorCode::kCorrupt, "doc");
  EXPECT_EQ(j.dump(), R"({"zeta":1,"alpha":{"y":[true,null],"b":"x"},"mid":2.5})");
  EXPECT_THROW(parse_json_ordered(R"({"a": 1, "a": 2})", JsonLimits(), ErrorCode::kCorrupt, "d"),
               Error);
  EXPECT_THROW(parse_json_ordered("\"\xff\"", JsonLimits(), ErrorCode::kCorrupt, "d"), Error);
  JsonLimits lenient;
  lenient.reject_duplicate_keys = false;
  EXPECT_EQ(
      parse_json_ordered(R"({"b": 1, "a": 2, "b": 3})", lenient, ErrorCode::kCorrupt, "d").dump(),
      R"({"b":3,"a":2})");
  // Many keys in one object: each is appended, not searched for (linear).
  std::string many = "{";
  for (int i = 0; i < 200000; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  many += "}";
  const nlohmann::ordered_json m = parse_json_ordered(many, JsonLimits(), ErrorCode::kCorrupt, "d");
  ASSERT_EQ(m.size(), 200000u);
  EXPECT_EQ(m.begin().key(), "k0");
  EXPECT_EQ((--m.end()).key(), "k199999");
}

TEST(JsonReader, RejectsDuplicateKeysUnlessAllowed) {
  expect_rejected(R"({"a": 1, "b": {"x": 1, "x": 2}})", "duplicate key \"x\"");
  // "\u0061" is "a": duplicates are found after unescaping.
  expect_rejected(R"({"a": 1, "\u0061": 2})", "duplicate key \"a\"");
  JsonLimits lenient;
  lenient.reject_duplicate_keys = false;
  EXPECT_EQ(parse_json(R"({"a": 1, "a": 2})", lenient, ErrorCode::kCorrupt, "doc")["a"], 2);
}

TEST(JsonReader, RejectsInvalidUtf8) {
  expect_rejected("\"\xff\"", "at byte 1");
  // The message quotes the input but stays ASCII (it may be sent back as JSON).
  try {
    parse_json("\"\xff\"", JsonLimits(), ErrorCode::kCorrupt, "doc");
  } catch (const Error& e) {
    for (const char c : e.message()) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << e.what();
  }
  expect_rejected("\"\xc0\xaf\"", "at byte");       // overlong '/'
  expect_rejected("\"\xed\xa0\x80\"", "at byte");   // a UTF-16 surrogate in UTF-8
  expect_rejected(R"("\ud800")", "at byte");        // an unpaired \u escape
  expect_rejected("{\"a\xe9\": 1}", "at byte");     // Latin-1 in a key
  expect_rejected("[1, \xe2\x80\xa8]", "at byte");  // valid UTF-8 outside a string
}

TEST(JsonReader, RejectsNumbersThatOverflowADouble) {
  expect_rejected(R"({"ignored": 1e400})", "1e400");
  expect_rejected("[-1e999]", "1e999");
  EXPECT_EQ(parse_json("1e308", JsonLimits(), ErrorCode::kCorrupt, "doc").get<double>(), 1e308);
}

TEST(JsonReader, EnforcesTheSizeLimitAndTheCallersCode) {
  JsonLimits limits;
  limits.max_bytes = 8;
  expect_rejected("[1,2,3,4,5]", "over the limit of 8 bytes", limits);
  expect_rejected("{", "at byte", JsonLimits(), ErrorCode::kInvalidArgument);
}

std::string temp_path(const std::string& name) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::string dir = tmp ? tmp : "/tmp";
  std::filesystem::create_directories(dir);
  return dir + "/json_parse_test_" + name;
}

TEST(ReadFileBounded, ReadsSmallFilesAndRejectsLargeOnes) {
  const std::string path = temp_path("f.txt");
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(100, 'x');
  }
  EXPECT_EQ(read_file_bounded(path, 100, "f"), std::string(100, 'x'));
  try {
    read_file_bounded(path, 99, "f");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.field(), "f");
    EXPECT_NE(e.message().find("larger than the limit of 99 bytes"), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(ReadFileBounded, MissingFilesAndDirectoriesAreNotFound) {
  for (const std::string& p : {temp_path("no_such_file"), std::string("/")}) {
    try {
      read_file_bounded(p, 100, "thing");
      ADD_FAILURE() << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kNotFound) << e.what();
      EXPECT_EQ(e.field(), "thing");
      EXPECT_NE(e.message().find(p), std::string::npos) << e.what();
    }
  }
}

TEST(ReadFileBounded, StopsReadingAFileWithoutASize) {
  // /dev/zero reports size 0 and never ends: the reader stops at the limit.
  try {
    read_file_bounded("/dev/zero", 1 << 20, "zero");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << e.what();
  }
}

}  // namespace
}  // namespace detinfer::core
