// core::ObjectReader and the element readers (core/json_fields.h): every failure names the
// value's path and carries the policy's code; unknown fields and nulls follow the policy.
#include "core/json_fields.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

namespace detinfer::core {
namespace {

// Expects `read` to throw `code` with `needle` in its message.
void expect_error(const std::function<void()>& read, ErrorCode code, const std::string& needle) {
  try {
    read();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
  }
}

const json kDoc = json::parse(
    R"({"name": "x", "n": 7, "big": 18446744073709551615, "neg": -3, "f": 0.5, "b": true,
        "nothing": null, "h": "00000000000000ff", "seed": "18446744073709551615",
        "obj": {"k": 1}, "arr": [1, 2]})");

TEST(JsonFields, ReadsEachTypeAndNamesThePathOnFailure) {
  ObjectReader r(kDoc, "doc");
  EXPECT_EQ(r.string("name"), "x");
  EXPECT_EQ(r.integer("n", 0, 10), 7);
  EXPECT_EQ(r.number("f"), 0.5);
  EXPECT_TRUE(r.boolean("b"));
  EXPECT_EQ(r.hex64("h"), 0xffu);
  EXPECT_EQ(as_decimal_u64(kDoc["seed"], "doc.seed"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(r.object("obj").integer("k", 0, 1), 1);
  EXPECT_EQ(r.array("arr").size(), 2u);
  expect_error([&] { r.integer("n", 0, 6); }, ErrorCode::kCorrupt, "doc.n: 7 is outside [0, 6]");
  expect_error([&] { r.integer("big", 0, 100); }, ErrorCode::kCorrupt, "doc.big: ");
  expect_error([&] { r.integer("neg", 0, 100); }, ErrorCode::kCorrupt, "doc.neg: -3 is outside");
  expect_error([&] { r.string("n"); }, ErrorCode::kCorrupt, "doc.n: expected a string");
  expect_error([&] { r.boolean("name"); }, ErrorCode::kCorrupt, "doc.name: expected a boolean");
  expect_error([&] { r.hex64("name"); }, ErrorCode::kCorrupt, "16 lowercase hex digits");
  expect_error([&] { r.string("absent"); }, ErrorCode::kCorrupt, "doc.absent is missing");
  expect_error([&] { r.object("arr"); }, ErrorCode::kCorrupt, "doc.arr: expected an object");
  expect_error([&] { as_decimal_u64(json("007"), "doc.s"); }, ErrorCode::kCorrupt,
               "without leading zeros");
  expect_error([&] { as_decimal_u64(json("18446744073709551616"), "doc.s"); }, ErrorCode::kCorrupt,
               "doc.s: expected a decimal uint64");
}

TEST(JsonFields, TheCodeIsThePolicys) {
  JsonReadPolicy request;
  request.code = ErrorCode::kInvalidArgument;
  ObjectReader r(kDoc, "body", request);
  expect_error([&] { r.integer("name", 0, 1); }, ErrorCode::kInvalidArgument, "body.name");
  expect_error([&] { r.object("obj").string("k"); }, ErrorCode::kInvalidArgument, "body.obj.k");
  expect_error([&] { ObjectReader(json::array(), "body", request); }, ErrorCode::kInvalidArgument,
               "body: expected an object");
}

TEST(JsonFields, UnknownFieldsAreRejectedUnlessThePolicyAllowsThem) {
  JsonReadPolicy strict;
  strict.format = "test/1";
  ObjectReader r(kDoc, "doc", strict);
  r.string("name");
  expect_error([&] { r.done(); }, ErrorCode::kCorrupt, " is not part of test/1");
  JsonReadPolicy lenient;
  lenient.reject_unknown = false;
  ObjectReader l(kDoc, "doc", lenient);
  l.string("name");
  EXPECT_NO_THROW(l.done());
}

TEST(JsonFields, NullIsAbsentOnlyWhereThePolicySaysSo) {
  ObjectReader plain(kDoc, "doc");
  EXPECT_TRUE(plain.has("nothing"));
  expect_error([&] { plain.integer_or("nothing", 0, 1, 1); }, ErrorCode::kCorrupt,
               "doc.nothing: expected an integer");
  JsonReadPolicy config;
  config.null_is_absent = true;
  ObjectReader c(kDoc, "config.json", config);
  EXPECT_FALSE(c.has("nothing"));
  EXPECT_EQ(c.integer_or("nothing", 0, 9, 4), 4);
  EXPECT_EQ(c.string_or("nothing", "dflt"), "dflt");
  expect_error([&] { c.integer("nothing", 0, 9); }, ErrorCode::kCorrupt,
               "config.json.nothing is missing");
}

TEST(JsonFields, OptionalReadersCheckWhatIsThere) {
  ObjectReader r(kDoc, "doc");
  EXPECT_EQ(r.integer_or("absent", 0, 9, 3), 3);
  EXPECT_EQ(r.integer_or("n", 0, 9, 3), 7);
  EXPECT_EQ(r.number_or("f", 0.0, 1.0, 2.0), 0.5);
  EXPECT_EQ(r.boolean_or("absent", true), true);
  expect_error([&] { r.number_or("f", 0.75, 1.0, 2.0); }, ErrorCode::kCorrupt,
               "doc.f: 0.5 is outside [0.75, 1]");
  expect_error([&] { r.boolean_or("n", false); }, ErrorCode::kCorrupt, "doc.n: expected a boolean");
}

}  // namespace
}  // namespace detinfer::core
