// `detinfer generate --transcript` then `detinfer verify` in other processes: exit 0 when
// verified, 1 when a recorded token was changed (naming the step), 2 for usage and input
// errors (missing flag, unreadable or malformed file, another model).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/subprocess.h"
#include "session/flipped_model.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::cli_path;
using testing::run_shell;

std::string tmp_path(const std::string& name) {
  return testing::test_tmp_path("verify-cli-", name);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

TEST(VerifyCli, GeneratedTranscriptVerifiesAndATamperedOneDivergesAtItsStep) {
  const std::string model = testing::tiny_model_dir();
  const std::string file = tmp_path("t.json");
  std::remove(file.c_str());
  const auto g = run_shell(cli_path() + " generate --model " + model +
                           " --prompt 'Check me later' --max-new-tokens 12 --ignore-eos"
                           " --temperature 0.9 --top-p 0.9 --seed 5 --threads 1 --json"
                           " --transcript " +
                           file);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const auto out = nlohmann::json::parse(g.out);
  const auto written = nlohmann::json::parse(read_all(file));
  EXPECT_EQ(out["detinfer"]["transcript"], written);  // --json carries the same object
  EXPECT_EQ(written["format"], "detinfer.transcript/1");

  const auto v = run_shell(cli_path() + " verify --model " + model + " --transcript " + file +
                           " --threads 2 --prefill-chunk 5");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("verified"), std::string::npos) << v.out;
  const auto vj =
      run_shell(cli_path() + " verify --model " + model + " --transcript " + file + " --json");
  EXPECT_EQ(vj.exit_code, 0) << vj.err;
  EXPECT_EQ(nlohmann::json::parse(vj.out)["verified"], true) << vj.out;

  nlohmann::json t = written;
  t["samples"][0]["tokens"][6] = (t["samples"][0]["tokens"][6].get<int>() + 1) % 512;
  const std::string tampered = tmp_path("tampered.json");
  write_all(tampered, t.dump());
  const auto d =
      run_shell(cli_path() + " verify --model " + model + " --transcript " + tampered + " --json");
  EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
  const auto dj = nlohmann::json::parse(d.out);
  EXPECT_EQ(dj["verified"], false);
  EXPECT_EQ(dj["divergence"]["step"], 6) << d.out;
  EXPECT_EQ(dj["divergence"]["expected_token"], written["samples"][0]["tokens"][6]) << d.out;
  const auto dt = run_shell(cli_path() + " verify --model " + model + " --transcript " + tampered);
  EXPECT_EQ(dt.exit_code, 1);
  EXPECT_NE(dt.out.find("step 6"), std::string::npos) << dt.out;
}

// A transcript made with weights quantized on load (--weights q8_0) is verified by a
// session that quantizes them the same way, without a flag: the transcript names it.
TEST(VerifyCli, QuantizedTranscriptOpensTheSameWeightFormat) {
  const std::string model = testing::tiny_model_dir();
  const std::string file = tmp_path("q8.json");
  std::remove(file.c_str());
  const auto g = run_shell(cli_path() + " generate --model " + model +
                           " --prompt 'Check me later' --max-new-tokens 10 --ignore-eos"
                           " --weights q8_0 --threads 1 --transcript " +
                           file);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const auto written = nlohmann::json::parse(read_all(file));
  ASSERT_EQ(written["numerics"]["weight_format"].get<std::string>().rfind("q8_0/qspec", 0), 0u)
      << written.dump();
  const auto v = run_shell(cli_path() + " verify --model " + model + " --transcript " + file);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("verified"), std::string::npos) << v.out;
}

TEST(VerifyCli, UsageAndInputErrorsExitTwo) {
  const std::string model = testing::tiny_model_dir();
  const std::string file = tmp_path("t2.json");
  const auto g = run_shell(cli_path() + " generate --model " + model +
                           " --prompt-ids 5,6,7,8 --max-new-tokens 4 --transcript " + file);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(run_shell(cli_path() + " verify --model " + model).exit_code, 2);
  EXPECT_EQ(run_shell(cli_path() + " verify --transcript " + file).exit_code, 2);
  EXPECT_EQ(run_shell(cli_path() + " verify --model " + model + " --transcript " + file +
                      " --no-such-flag")
                .exit_code,
            2);
  const auto missing =
      run_shell(cli_path() + " verify --model " + model + " --transcript /nonexistent.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_FALSE(missing.err.empty());
  const std::string junk = tmp_path("junk.json");
  write_all(junk, "{\"format\": \"detinfer.transcript/1\", \"model\": [[[");
  EXPECT_EQ(run_shell(cli_path() + " verify --model " + model + " --transcript " + junk).exit_code,
            2);
  // Another model (one weight byte flipped): refused, never verified.
  const std::string dir =
      testing::flipped_model_copy(model, tmp_path("flipped"), /*from_end=*/3, /*mask=*/0x10);
  const auto other = run_shell(cli_path() + " verify --model " + dir + " --transcript " + file);
  EXPECT_EQ(other.exit_code, 2) << other.out << other.err;
  EXPECT_NE(other.err.find("model"), std::string::npos) << other.err;
}

}  // namespace
}  // namespace detinfer
