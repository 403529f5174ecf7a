// Test helper: a tool call of the get_weather / get_time tools that the tool-call tests
// declare (tool_calls_serve_test.cpp, fixtures/openai-node/client.js), checked by hand
// against their parameter schemas.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace detinfer::testing {

inline std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// get_weather: {city: string of at most 8 characters, days: integer in [min_days,
// max_days]}, both required, nothing else; get_time: {tz: "UTC" or "CET"}.
inline void expect_valid_tool_call(
    const nlohmann::json& call, std::int64_t min_days = std::numeric_limits<std::int64_t>::min(),
    std::int64_t max_days = std::numeric_limits<std::int64_t>::max()) {
  using nlohmann::json;
  EXPECT_EQ(call["type"], "function") << call;
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u) << call;
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call;
  if (name == "get_weather") {
    ASSERT_EQ(args.size(), 2u) << args;
    ASSERT_TRUE(args["city"].is_string()) << args;
    EXPECT_LE(code_points(args["city"].get<std::string>()), 8u) << args;
    ASSERT_TRUE(args["days"].is_number_integer()) << args;
    EXPECT_GE(args["days"].get<std::int64_t>(), min_days) << args;
    EXPECT_LE(args["days"].get<std::int64_t>(), max_days) << args;
  } else {
    ASSERT_EQ(name, "get_time");
    ASSERT_EQ(args.size(), 1u) << args;
    EXPECT_TRUE(args["tz"] == "UTC" || args["tz"] == "CET") << args;
  }
}

}  // namespace detinfer::testing
