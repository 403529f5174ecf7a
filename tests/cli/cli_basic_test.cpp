// Runs the real `detinfer` program.
#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "detinfer/version.h"

namespace detinfer {
namespace {

using testing::cli_path;
using testing::run_shell;

TEST(Cli, VersionPrintsVersion) {
  const auto r = run_shell(cli_path() + " version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(std::string("detinfer ") + DETINFER_VERSION_STRING), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("numerics spec v1"), std::string::npos) << r.out;
}

TEST(Cli, EnvPrintsEveryField) {
  const auto r = run_shell(cli_path() + " env");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* field :
       {"library_version:", "git_revision:", "compiler:", "build_flags:", "cpu_model:",
        "cpu_flags:", "hardware_threads:", "libtorch_version:", "glibc_version:", "os:"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << "missing " << field << " in\n" << r.out;
  }
  EXPECT_NE(r.out.find("-ffp-contract=off"), std::string::npos);
}

TEST(Cli, EnvJsonIsOneObject) {
  const auto r = run_shell(cli_path() + " env --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_NE(r.out.find("\"libtorch_version\""), std::string::npos);
}

TEST(Cli, UnknownSubcommandFails) {
  const auto r = run_shell(cli_path() + " no-such-command");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace detinfer
