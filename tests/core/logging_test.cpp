#include "detinfer/logging.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
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

TEST(Logging, CallbackReceivesRecordsThatPassTheLevelInsteadOfStderr) {
  const LogLevel before = log_level();
  std::vector<std::pair<LogLevel, std::string>> got;
  set_log_callback([&](LogLevel level, std::string_view message) {
    got.emplace_back(level, std::string(message));
  });
  set_log_level(LogLevel::kInfo);
  logger().info("model {} loaded", 7);
  logger().debug("below the level");
  logger().error("disk tier: {}", "full");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, LogLevel::kInfo);
  EXPECT_EQ(got[0].second, "model 7 loaded");
  EXPECT_EQ(got[1].first, LogLevel::kError);
  EXPECT_EQ(got[1].second, "disk tier: full");

  // A throwing callback never reaches the logging call site.
  set_log_callback([](LogLevel, std::string_view) { throw std::runtime_error("boom"); });
  EXPECT_NO_THROW(logger().warn("dropped"));

  // An empty callback restores stderr; the old callback sees nothing more.
  set_log_callback({});
  testing::internal::CaptureStderr();
  logger().warn("to stderr");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("to stderr"), std::string::npos) << err;
  EXPECT_EQ(got.size(), 2u);
  set_log_level(before);
}

}  // namespace
}  // namespace detinfer
