#include "detinfer/logging.h"

#include <gtest/gtest.h>

#include "detinfer/error.h"

namespace detinfer {
namespace {

TEST(Logging, ParseAndSetLevel) {
  EXPECT_EQ(parse_log_level("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarn);
  EXPECT_THROW(parse_log_level("loud"), Error);
  const LogLevel before = log_level();
  set_log_level(LogLevel::kError);
  EXPECT_EQ(log_level(), LogLevel::kError);
  set_log_level(before);
}

}  // namespace
}  // namespace detinfer
