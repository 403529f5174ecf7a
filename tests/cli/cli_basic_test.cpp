// Runs the real `detinfer` program.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

TEST(Cli, EnvShowsTheEnvironmentVariablesFingerprintsRecord) {
  // deploy/entrypoint.sh exports the image's package versions as DETINFER_PACKAGES.
  const std::string pkgs = "sha256:0123 g++-12=12.2.0-14 libc6=2.36-9";
  const auto r = run_shell("DETINFER_PACKAGES='" + pkgs + "' DETINFER_LOG_LEVEL=debug " +
                           cli_path() + " env --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["env_vars"]["DETINFER_PACKAGES"], pkgs);
  EXPECT_FALSE(j["env_vars"].contains("DETINFER_LOG_LEVEL"));  // not a numerics input
  const auto text = run_shell("DETINFER_PACKAGES='" + pkgs + "' " + cli_path() + " env");
  EXPECT_NE(text.out.find("env DETINFER_PACKAGES=" + pkgs + "\n"), std::string::npos) << text.out;
}

TEST(Cli, UnknownSubcommandFails) {
  const auto r = run_shell(cli_path() + " no-such-command");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace detinfer
