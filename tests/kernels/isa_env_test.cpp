// DETINFER_CPU_ISA picks the kernels' ISA at start-up. ctest runs this program twice
// (tests/kernels/CMakeLists.txt): with DETINFER_CPU_ISA=avx2 and with an unknown value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "detinfer/error.h"
#include "kernels/kernels.h"

namespace detinfer::kernels {
namespace {

TEST(IsaEnv, EnvironmentVariableSelectsTheIsa) {
  const char* env = std::getenv("DETINFER_CPU_ISA");
  if (env == nullptr) GTEST_SKIP() << "run by ctest with DETINFER_CPU_ISA set";
  const std::string v = env;
  if (v == "avx2") {
    if (isa_supported(Isa::kAvx2)) {
      EXPECT_EQ(active_isa(), Isa::kAvx2);
      set_isa(Isa::kScalar);  // set_isa overrides the environment
      EXPECT_EQ(active_isa(), Isa::kScalar);
    } else {
      try {
        active_isa();
        FAIL() << "an ISA the CPU lacks was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      }
    }
  } else {
    try {
      active_isa();
      FAIL() << "DETINFER_CPU_ISA=" << v << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(e.message().find(v), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace detinfer::kernels
