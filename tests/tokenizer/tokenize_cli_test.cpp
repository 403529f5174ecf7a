// `detinfer tokenize`: one id line per text line, --decode back, errors on bad ids.
#include <gtest/gtest.h>

#include "common/subprocess.h"

namespace detinfer {
namespace {

using testing::cli_path;
using testing::run_shell;

std::string fixture(const std::string& name) {
  return std::string(DETINFER_SOURCE_DIR) + "/tests/tokenizer/fixtures/" + name;
}

TEST(TokenizeCli, EncodesLinesAndDecodesThemBack) {
  const std::string tok = " tokenize --tokenizer " + fixture("byte_level.json");
  const auto enc = run_shell(cli_path() + tok, "Hello world\n1234567\n\n");
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  EXPECT_EQ(enc.out, "284,274,264\n284,266,19,20,21,22\n284\n");
  const auto raw = run_shell(cli_path() + tok + " --no-special", "Hello world\n");
  EXPECT_EQ(raw.out, "274,264\n");
  const auto dec = run_shell(cli_path() + tok + " --decode", "284,274,264\n266, 19\n");
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_EQ(dec.out, "<|begin_of_text|>Hello world\n1234\n");
  const auto skip = run_shell(cli_path() + tok + " --decode --no-special", "284,274,264\n");
  EXPECT_EQ(skip.out, "Hello world\n");
}

TEST(TokenizeCli, FolderWithConfigAndErrors) {
  const auto bad = run_shell(
      cli_path() + " tokenize --decode --tokenizer " + fixture("sentencepiece.json"), "1,99999\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("99999"), std::string::npos) << bad.err;
  const auto junk = run_shell(
      cli_path() + " tokenize --decode --tokenizer " + fixture("sentencepiece.json"), "1,two\n");
  EXPECT_EQ(junk.exit_code, 1);
  const auto missing = run_shell(cli_path() + " tokenize --tokenizer /nonexistent", "x\n");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace detinfer
