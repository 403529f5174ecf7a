// Devices and numerics modes: parsing, names and the errors that name the field.
#include "detinfer/numerics.h"

#include <gtest/gtest.h>

#include "detinfer/error.h"

namespace detinfer {
namespace {

TEST(Numerics, ParsesDevices) {
  EXPECT_EQ(parse_device("cpu").type, Device::kCpu);
  const DeviceSpec cuda = parse_device("cuda");
  EXPECT_EQ(cuda.type, Device::kCuda);
  EXPECT_EQ(cuda.index, 0);
  EXPECT_EQ(parse_device("cuda:7").index, 7);
  EXPECT_EQ(parse_device("cuda:1023").index, 1023);
  EXPECT_EQ(to_string(parse_device("cuda")), "cuda:0");
  EXPECT_EQ(to_string(parse_device("cuda:12")), "cuda:12");
  EXPECT_EQ(to_string(DeviceSpec{}), "cpu");
}

TEST(Numerics, RejectsBadDevicesNamingTheField) {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1024", "cuda:0x1",
                          "cuda:99999", "cuda: 1", "cpu:0", "cuda:1a"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_EQ(e.field(), "device") << bad;
      EXPECT_NE(e.message().find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Numerics, ModeNamesRoundTrip) {
  for (const NumericsMode m :
       {NumericsMode::kCanonical, NumericsMode::kFast, NumericsMode::kDeviceInvariant}) {
    EXPECT_EQ(parse_numerics_mode(to_string(m)), m);
  }
  EXPECT_STREQ(to_string(NumericsMode::kDeviceInvariant), "device_invariant");
  try {
    parse_numerics_mode("exact");
    ADD_FAILURE() << "accepted 'exact'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "numerics");
  }
}

}  // namespace
}  // namespace detinfer
