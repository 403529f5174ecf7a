#include "detinfer/environment.h"

#include <gtest/gtest.h>

#include "detinfer/version.h"

namespace detinfer {
namespace {

TEST(Environment, ReportsBuildAndMachineFacts) {
  const EnvironmentInfo e = collect_environment();
  EXPECT_EQ(e.library_version, DETINFER_VERSION_STRING);
  EXPECT_FALSE(e.git_revision.empty());
  EXPECT_FALSE(e.compiler.empty());
  EXPECT_NE(e.build_flags.find("-ffp-contract=off"), std::string::npos);
  EXPECT_EQ(e.build_flags.find("fast-math "), std::string::npos);
  EXPECT_EQ(e.numerics_spec_version, kNumericsSpecVersion);
  EXPECT_FALSE(e.cpu_model.empty());
  EXPECT_GT(e.hardware_threads, 0u);
  EXPECT_FALSE(e.glibc_version.empty());
  EXPECT_FALSE(e.os.empty());
  EXPECT_FALSE(e.libtorch_version.empty());
}

}  // namespace
}  // namespace detinfer
