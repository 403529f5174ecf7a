// `detinfer diff A.json B.json`: exit 0 identical/reproduced, 1 different, 2 error.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "fingerprint/fingerprint_test_util.h"

namespace detinfer {
namespace {

using testing::cli_path;
using testing::run_shell;

std::string write_temp(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::string dir = tmp ? tmp : "/tmp";
  std::system(("mkdir -p '" + dir + "'").c_str());
  const std::string path = dir + "/cli_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CliDiff, IdenticalFilesExitZero) {
  const RunFingerprint a = testing::make_fingerprint(1);
  const std::string pa = write_temp("a.json", a.to_json(2));
  const std::string pb = write_temp("b.jsonl", a.to_json() + "\n");
  const auto r = run_shell(cli_path() + " diff " + pa + " " + pb);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "identical\n");
}

TEST(CliDiff, RunContextDifferencesStillReproduce) {
  RunFingerprint a = testing::make_fingerprint(1);
  RunFingerprint b = a;
  b.numerics.threads = 7;
  const std::string pa = write_temp("c.json", a.to_json());
  const std::string pb = write_temp("d.json", b.to_json());
  auto r = run_shell(cli_path() + " diff " + pa + " " + pb);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reproduced"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("threads: 2 vs 7"), std::string::npos) << r.out;
  r = run_shell(cli_path() + " diff --strict " + pa + " " + pb);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
}

TEST(CliDiff, DivergenceExitsOneAndJsonNamesTheStep) {
  const RunFingerprint a = testing::at_level(testing::make_fingerprint(2), RecordLevel::kSteps);
  RunFingerprint b = a;
  b.request.config.temperature = 1.0f;
  b.sequences[0].tokens[3] = 30;
  b.sequences[0].step_digests[3] ^= 1;
  b.sequences[0].chain_digest = chain_digest(b.sequences[0].step_digests);
  const std::string pa = write_temp("e.json", a.to_json());
  const std::string pb = write_temp("f.json", b.to_json());
  auto r = run_shell(cli_path() + " diff " + pa + " " + pb);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("group config differs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first divergence: sequence 0, step 3"), std::string::npos) << r.out;
  r = run_shell(cli_path() + " diff --json " + pa + " " + pb);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["identical"].get<bool>());
  EXPECT_EQ(j["divergence"]["step"], 3);
  EXPECT_EQ(j["divergence"]["token_b"], 30);
  EXPECT_EQ(j["groups"][0]["group"], "config");
}

TEST(CliDiff, ErrorsExitTwo) {
  const std::string good = write_temp("g.json", testing::make_fingerprint(1).to_json());
  const std::string bad = write_temp("h.json", "{\"schema\": \"detinfer.fingerprint/9\"}");
  const std::string junk = write_temp("i.json", "{not json");
  auto r = run_shell(cli_path() + " diff " + good + " " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("detinfer.fingerprint/9"), std::string::npos) << r.err;
  r = run_shell(cli_path() + " diff " + good + " " + junk);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = run_shell(cli_path() + " diff " + good + " /no/such/file.json");
  EXPECT_EQ(r.exit_code, 2);
  // A JSON Lines file with several fingerprints needs an index.
  const RunFingerprint a = testing::make_fingerprint(1);
  const std::string many = write_temp("j.jsonl", a.to_json() + "\n" + a.to_json() + "\n");
  r = run_shell(cli_path() + " diff " + good + " " + many);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--index-b"), std::string::npos) << r.err;
  r = run_shell(cli_path() + " diff --index-b 1 " + good + " " + many);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace detinfer
