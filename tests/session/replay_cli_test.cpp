// `detinfer generate --fingerprint` in one process, `detinfer replay` in others: with a
// different thread count, while another process generates concurrently, and against a
// model with one weight byte flipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <future>

#include "common/subprocess.h"
#include "session/flipped_model.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::cli_path;
using testing::run_shell;

std::string tmp_path(const std::string& name) {
  return testing::test_tmp_path("replay-cli-", name);
}

TEST(ReplayCli, FingerprintFromOneProcessReplaysInAnother) {
  const std::string fp = tmp_path("fp.jsonl");
  std::remove(fp.c_str());
  const std::string model = testing::tiny_model_dir();
  const auto g = run_shell(cli_path() + " generate --model " + model +
                           " --prompt 'Replay me, please' --max-new-tokens 10 --ignore-eos"
                           " --temperature 0.8 --seed 99 --threads 1 --fingerprint " +
                           fp);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  ASSERT_TRUE(std::filesystem::exists(fp));

  // Another process generates at the same time (concurrent load on the machine).
  auto load = std::async(std::launch::async, [&] {
    return run_shell(cli_path() + " generate --model " + model +
                     " --prompt 'background load' --max-new-tokens 40 --ignore-eos --threads 2");
  });
  const auto r = run_shell(cli_path() + " replay " + fp + " --model " + model + " --threads 2");
  EXPECT_EQ(load.get().exit_code, 0);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replay: reproduced"), std::string::npos) << r.out;

  const auto j = run_shell(cli_path() + " replay " + fp + " --model " + model + " --json");
  EXPECT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("\"verdict\": \"reproduced\""), std::string::npos) << j.out;

  // Fast mode: runs, but is never "reproduced".
  if (!DETINFER_TEST_WITH_TORCH) return;  // built with DETINFER_WITH_TORCH=OFF
  const auto f = run_shell(cli_path() + " replay " + fp + " --model " + model + " --mode fast");
  EXPECT_EQ(f.exit_code, 1) << f.out << f.err;
  EXPECT_NE(f.out.find("numerics"), std::string::npos) << f.out;
}

TEST(ReplayCli, RefusesAFlippedWeightByteAndBadFiles) {
  const std::string fp = tmp_path("fp2.jsonl");
  std::remove(fp.c_str());
  const std::string model = testing::tiny_model_dir();
  const auto g = run_shell(cli_path() + " generate --model " + model +
                           " --prompt-ids 5,6,7,8 --max-new-tokens 4 --fingerprint " + fp +
                           " --fingerprint-level final");
  ASSERT_EQ(g.exit_code, 0) << g.err;

  const std::string dir =
      testing::flipped_model_copy(model, tmp_path("flipped"), /*from_end=*/3, /*mask=*/0x10);
  const auto r = run_shell(cli_path() + " replay " + fp + " --model " + dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("model differs"), std::string::npos) << r.out;

  const auto missing = run_shell(cli_path() + " replay /nonexistent.json --model " + model);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_FALSE(missing.err.empty());
}

}  // namespace
}  // namespace detinfer
