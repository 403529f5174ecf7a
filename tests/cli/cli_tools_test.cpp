// Runs the real `detinfer` tools on the tiny model: generate --json, consistency (table
// and --json, canonical and both modes), bench --json, and a diff/replay round trip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_test_support.h"

namespace detinfer {
namespace {

using nlohmann::json;
using testing::cli_path;
using testing::run_shell;

class CliTools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = testing::make_tiny_model_with_cli(testing::cli_scratch_dir("tiny"));
  }
  void SetUp() override { ASSERT_FALSE(model_.empty()) << "detinfer make-tiny-model failed"; }

  // `detinfer ARGS --model <tiny>`; one kernel thread keeps the loaded CI machine calm.
  static testing::ProcessResult run(const std::string& args) {
    return run_shell(cli_path() + " " + args + " --model '" + model_ + "' --threads 1");
  }
  static json parse(const testing::ProcessResult& r) {
    const json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out << r.err;
    return j;
  }

  static std::string model_;
};
std::string CliTools::model_;

TEST_F(CliTools, GenerateJsonHasEveryField) {
  const auto r =
      run("generate --prompt 'Hello world' --max-new-tokens 6 --ignore-eos --json"
          " --temperature 0.8 --seed 42");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = parse(r);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j["tokens"].is_array());
  EXPECT_EQ(j["tokens"].size(), 6u);
  for (const auto& t : j["tokens"]) {
    ASSERT_TRUE(t.is_number_integer());
    EXPECT_GE(t.get<int>(), 0);
    EXPECT_LT(t.get<int>(), 512);  // the tiny model's vocabulary
  }
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["finish_reason"], "length");
  ASSERT_TRUE(j["digest"].is_string());
  EXPECT_EQ(j["digest"].get<std::string>().size(), 16u);
  EXPECT_EQ(j["mode"], "canonical");

  // Same request, another process: the same bits.
  const auto again =
      run("generate --prompt 'Hello world' --max-new-tokens 6 --ignore-eos --json"
          " --temperature 0.8 --seed 42");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const json k = parse(again);
  EXPECT_EQ(k["tokens"], j["tokens"]);
  EXPECT_EQ(k["digest"], j["digest"]);
}

TEST_F(CliTools, ConsistencyCanonicalTableShowsOneDistinctOutput) {
  const auto r = run("consistency --runs 30 --max-new-tokens 8 --concurrency 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Header, then one row: mode runs distinct most_common first-divergence.
  std::istringstream lines(r.out);
  std::string header, row;
  ASSERT_TRUE(std::getline(lines, header)) << r.out;
  EXPECT_EQ(header.rfind("mode", 0), 0u) << header;
  EXPECT_NE(header.find("distinct"), std::string::npos) << header;
  EXPECT_NE(header.find("most_common"), std::string::npos) << header;
  ASSERT_TRUE(std::getline(lines, row)) << r.out;
  std::istringstream fields(row);
  std::string mode, histogram;
  int runs = 0, distinct = 0, most_common = 0;
  fields >> mode >> runs >> distinct >> most_common >> histogram;
  ASSERT_FALSE(fields.fail()) << row;
  EXPECT_EQ(mode, "canonical");
  EXPECT_EQ(runs, 30);
  EXPECT_EQ(distinct, 1);
  EXPECT_EQ(most_common, 30);
  EXPECT_EQ(histogram, "-");  // no divergent run
}

TEST_F(CliTools, ConsistencyBothModesJsonIsAListOfTwo) {
  if (!DETINFER_TEST_WITH_TORCH)
    GTEST_SKIP() << "built with DETINFER_WITH_TORCH=OFF: fast mode is unsupported";
  const auto r = run("consistency --mode both --json --runs 4 --max-new-tokens 4 --concurrency 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = parse(r);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["mode"], "canonical");
  EXPECT_EQ(j[1]["mode"], "fast");
  for (const auto& m : j) {
    EXPECT_EQ(m["runs"], 4);
    ASSERT_TRUE(m["distinct_outputs"].is_number_integer());
    EXPECT_GE(m["distinct_outputs"].get<int>(), 1);
    ASSERT_TRUE(m["most_common_count"].is_number_integer());
    EXPECT_GE(m["most_common_count"].get<int>(), 1);
    EXPECT_LE(m["most_common_count"].get<int>(), 4);
    EXPECT_TRUE(m["first_divergence_histogram"].is_object());
  }
  EXPECT_EQ(j[0]["distinct_outputs"], 1);  // canonical: always one
}

TEST_F(CliTools, BenchJsonFieldsArePositive) {
  if (!DETINFER_TEST_WITH_TORCH)
    GTEST_SKIP() << "built with DETINFER_WITH_TORCH=OFF: fast mode is unsupported";
  const auto r = run("bench --json --batch 1,4 --repeats 1 --prompt-tokens 16 --decode-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = parse(r);
  ASSERT_TRUE(j.is_object());
  for (const char* k : {"threads", "read_bandwidth_bytes_per_s", "weight_bytes_per_token",
                        "decode_bound_tokens_per_s", "weight_bytes", "resident_bytes",
                        "kv_bytes_per_token", "decode_step_bytes", "peak_rss_bytes"}) {
    ASSERT_TRUE(j.contains(k) && j[k].is_number()) << k << " in " << r.out;
    EXPECT_GT(j[k].get<double>(), 0) << k;
  }
  // A step reads its weights plus some KV, never more weights than the model keeps.
  EXPECT_GT(j["decode_step_bytes"].get<double>(), j["weight_bytes_per_token"].get<double>());
  EXPECT_LE(j["weight_bytes_per_token"].get<double>(), j["resident_bytes"].get<double>());
  // The process holds at least the weights it keeps.
  EXPECT_GE(j["peak_rss_bytes"].get<double>(), j["resident_bytes"].get<double>());
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["prompt_tokens"], 16);
  EXPECT_EQ(j["decode_tokens"], 4);
  ASSERT_TRUE(j["results"].is_array());
  ASSERT_EQ(j["results"].size(), 4u);  // {canonical, fast} x {1, 4}
  for (const auto& row : j["results"]) {
    EXPECT_TRUE(row["mode"] == "canonical" || row["mode"] == "fast") << row;
    EXPECT_TRUE(row["batch"] == 1 || row["batch"] == 4) << row;
    for (const char* k : {"prefill_tokens_per_s", "decode_tokens_per_s",
                          "decode_vs_bandwidth_bound", "decode_step_bytes", "peak_rss_bytes"}) {
      ASSERT_TRUE(row.contains(k) && row[k].is_number()) << k << " in " << row;
      EXPECT_GT(row[k].get<double>(), 0) << k << " in " << row;
    }
  }
}

// bf16 KV is stored in 2 bytes a value: the bench reports half the KV bytes per token of
// f32 KV and the same reserved budget (so twice the tokens).
TEST_F(CliTools, BenchJsonReportsKvBytesAsStored) {
  const std::string args =
      "bench --json --modes canonical --batch 1 --repeats 1 --prompt-tokens 8 --decode-tokens 2 "
      "--kv-budget-bytes 4194304";
  const auto f = run(args);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto h = run(args + " --kv-dtype bf16");
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const json jf = parse(f), jh = parse(h);
  EXPECT_EQ(jf["kv_dtype"], "f32");
  EXPECT_EQ(jh["kv_dtype"], "bf16");
  ASSERT_TRUE(jf["kv_bytes_per_token"].is_number_integer()) << f.out;
  EXPECT_EQ(2 * jh["kv_bytes_per_token"].get<std::int64_t>(),
            jf["kv_bytes_per_token"].get<std::int64_t>());
  EXPECT_EQ(jh["kv_reserved_bytes"], jf["kv_reserved_bytes"]);
}

// --context N measures decode after an N-token prompt, and the bytes a step reads grow by
// exactly the KV of the extra context; a context the model cannot hold is a clear error.
TEST_F(CliTools, BenchContextMeasuresDecodeAfterThatManyTokens) {
  const std::string args =
      "bench --json --modes canonical --batch 1 --repeats 1 --prompt-tokens 8 --decode-tokens 2";
  const auto dflt = run(args);
  ASSERT_EQ(dflt.exit_code, 0) << dflt.err;
  const auto longer = run(args + " --context 300");
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  const json a = parse(dflt), b = parse(longer);
  EXPECT_EQ(a["context_tokens"], 8);  // the short prompt of earlier versions
  EXPECT_EQ(b["context_tokens"], 300);
  const double kv = b["kv_bytes_per_token"].get<double>();
  ASSERT_GT(kv, 0);
  EXPECT_EQ(b["decode_step_bytes"].get<double>() - a["decode_step_bytes"].get<double>(),
            (300 - 8) * kv);
  EXPECT_EQ(b["results"][0]["decode_step_bytes"], b["decode_step_bytes"]);
  EXPECT_GT(b["results"][0]["decode_tokens_per_s"].get<double>(), 0);
  const auto too_long = run(args + " --context 5000");  // the tiny model holds 2048
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.err.find("context"), std::string::npos) << too_long.err;
}

// --speculative on bench and consistency (docs/speculative.md): bench reports the mode and
// the drafts of each row (self-drafting with the draft model accepts every greedy draft);
// consistency still sees one output; bad values are named.
TEST_F(CliTools, BenchAndConsistencyTakeSpeculative) {
  const std::string bench =
      "bench --json --modes canonical --batch 1,4 --repeats 1 --prompt-tokens 8 --decode-tokens 6";
  const auto off = run(bench);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(parse(off)["speculative"], "off");
  EXPECT_EQ(parse(off)["results"][0]["draft_tokens"], 0);
  const auto draft =
      run(bench + " --speculative draft --draft-tokens 3 --draft-model '" + model_ + "'");
  ASSERT_EQ(draft.exit_code, 0) << draft.err;
  const json d = parse(draft);
  EXPECT_EQ(d["speculative"], "draft");
  ASSERT_EQ(d["results"].size(), 2u) << draft.out;
  for (const auto& row : d["results"]) {
    EXPECT_GT(row["draft_tokens"].get<std::int64_t>(), 0) << row;
    EXPECT_EQ(row["accepted_draft_tokens"], row["draft_tokens"]) << row;  // greedy, self-draft
  }
  const auto c =
      run("consistency --json --runs 6 --max-new-tokens 12 --concurrency 1 "
          "--speculative ngram --draft-tokens 5 --temperature 0.7 --seed 4");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(parse(c)["distinct_outputs"], 1) << c.out;
  for (const std::string bad : {"bench --speculative eagle", "consistency --draft-tokens 9"}) {
    const auto r = run(bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(
        r.err.find(bad.find("eagle") != std::string::npos ? "--speculative" : "--draft-tokens"),
        std::string::npos)
        << r.err;
  }
}

TEST_F(CliTools, DiffAndReplayRoundTrip) {
  const std::string dir = testing::cli_scratch_dir("fp");
  const std::string gen =
      "generate --prompt 'Round trip' --max-new-tokens 5 --ignore-eos --temperature 0.7"
      " --seed 7 --fingerprint ";
  ASSERT_EQ(run(gen + dir + "/a.jsonl").exit_code, 0);
  ASSERT_EQ(run(gen + dir + "/b.jsonl").exit_code, 0);

  const auto same = run_shell(cli_path() + " diff " + dir + "/a.jsonl " + dir + "/b.jsonl");
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;

  const auto replay = run("replay " + dir + "/a.jsonl");
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  EXPECT_NE(replay.out.find("reproduced"), std::string::npos) << replay.out;

  // Another seed: diff reports the difference (exit 1).
  ASSERT_EQ(run("generate --prompt 'Round trip' --max-new-tokens 5 --ignore-eos"
                " --temperature 0.7 --seed 8 --fingerprint " +
                dir + "/c.jsonl")
                .exit_code,
            0);
  const auto other = run_shell(cli_path() + " diff " + dir + "/a.jsonl " + dir + "/c.jsonl");
  EXPECT_EQ(other.exit_code, 1) << other.out << other.err;
}

}  // namespace
}  // namespace detinfer
