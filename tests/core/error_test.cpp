#include "detinfer/error.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/check.h"

namespace detinfer {
namespace {

TEST(Error, CarriesCodeAndMessage) {
  try {
    fail(ErrorCode::kCorrupt, "file '", "x.safetensors", "': header length ", 7);
    FAIL() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.message(), "file 'x.safetensors': header length 7");
    EXPECT_EQ(std::string(e.what()), "corrupt: file 'x.safetensors': header length 7");
  }
}

TEST(Error, EveryCodeHasADistinctName) {
  const ErrorCode codes[] = {ErrorCode::kInvalidArgument,   ErrorCode::kNotFound,
                             ErrorCode::kCorrupt,           ErrorCode::kUnsupported,
                             ErrorCode::kResourceExhausted, ErrorCode::kUnavailable,
                             ErrorCode::kInternal};
  std::set<std::string> names;
  for (ErrorCode c : codes) names.insert(to_string(c));
  EXPECT_EQ(names.size(), 7u);
  EXPECT_STREQ(to_string(ErrorCode::kInvalidArgument), "invalid_argument");
  EXPECT_STREQ(to_string(static_cast<ErrorCode>(99)), "unknown");
}

TEST(Error, IsAStdException) {
  EXPECT_THROW(fail(ErrorCode::kNotFound, "missing"), std::runtime_error);
}

TEST(Error, InternalCheckThrowsInsteadOfAborting) {
  EXPECT_THROW(DETINFER_INTERNAL_CHECK(1 + 1 == 3), Error);
  EXPECT_NO_THROW(DETINFER_INTERNAL_CHECK(1 + 1 == 2));
}

}  // namespace
}  // namespace detinfer
