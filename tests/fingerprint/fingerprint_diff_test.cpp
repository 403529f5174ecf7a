// diff(a, b): groups and the first divergent step.
#include "detinfer/fingerprint_diff.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "fingerprint/fingerprint_test_util.h"

namespace detinfer {
bool operator==(const TokenLogit& a, const TokenLogit& b) {
  return a.token == b.token && a.logit == b.logit;
}

namespace {

using testing::at_level;
using testing::make_fingerprint;

// Replaces step `t` of sequence `s` with a different logits row and token, and
// re-chains, as a run that diverged there would record.
void diverge_at(RunFingerprint& fp, std::size_t s, std::size_t t, std::int32_t token) {
  auto& seq = fp.sequences[s];
  auto row = testing::random_logits(777, t, seq.logits.empty() ? 32 : seq.logits[t].size());
  row[static_cast<std::size_t>(token)] = 100.0f;  // the new winner
  seq.tokens[t] = token;
  seq.step_digests[t] = logits_digest(row.data(), row.size());
  if (!seq.logits.empty()) seq.logits[t] = row;
  seq.chain_digest = chain_digest(seq.step_digests);
}

TEST(FingerprintDiff, IdenticalRuns) {
  const RunFingerprint a = make_fingerprint(1);
  RunFingerprint b = RunFingerprint::from_json(a.to_json());
  b.cache.result_cache_hit = true;  // never compared
  const FingerprintDiff d = diff(a, b);
  EXPECT_TRUE(d.identical());
  EXPECT_TRUE(d.reproduced());
  EXPECT_EQ(d.to_text(), "identical\n");
  EXPECT_TRUE(nlohmann::json::parse(d.to_json())["identical"].get<bool>());
}

TEST(FingerprintDiff, NamesEachDifferingGroup) {
  const RunFingerprint a = make_fingerprint(1);
  struct Case {
    FingerprintGroup group;
    std::function<void(RunFingerprint&)> change;
    std::string field;
  };
  const std::vector<Case> cases = {
      {FingerprintGroup::kModel, [](RunFingerprint& f) { f.model.fingerprint.low ^= 1; },
       "fingerprint"},
      {FingerprintGroup::kTokenizer, [](RunFingerprint& f) { f.tokenizer_hash.high ^= 1; }, "hash"},
      {FingerprintGroup::kPrompt,
       [](RunFingerprint& f) {
         f.set_prompt({1, 2, 3});
       },
       "prompt_length"},
      {FingerprintGroup::kConfig, [](RunFingerprint& f) { f.request.config.top_p = 0.5f; },
       "top_p"},
      {FingerprintGroup::kConfig,
       [](RunFingerprint& f) { f.request.config.stop_token_ids.reset(); }, "stop_token_ids"},
      {FingerprintGroup::kSeed, [](RunFingerprint& f) { f.request.seed = 42; }, "seed"},
      {FingerprintGroup::kNumerics, [](RunFingerprint& f) { f.numerics.mode = "fast"; }, "mode"},
      {FingerprintGroup::kNumerics, [](RunFingerprint& f) { f.numerics.threads = 16; }, "threads"},
      {FingerprintGroup::kNumerics, [](RunFingerprint& f) { f.numerics.kv_dtype = "bf16"; },
       "kv_dtype"},
      {FingerprintGroup::kLibrary, [](RunFingerprint& f) { f.library.git_revision = "def"; },
       "git_revision"},
      {FingerprintGroup::kDevice, [](RunFingerprint& f) { f.device.cpu_model = "Other"; },
       "cpu_model"},
      {FingerprintGroup::kEnvironment,
       [](RunFingerprint& f) { f.environment.env_vars["OMP_NUM_THREADS"] = "1"; },
       "env.OMP_NUM_THREADS"},
  };
  for (const auto& c : cases) {
    RunFingerprint b = a;
    c.change(b);
    const FingerprintDiff d = diff(a, b);
    ASSERT_EQ(d.groups.size(), 1u) << to_string(c.group) << "\n" << d.to_text();
    EXPECT_EQ(d.groups[0].group, c.group);
    // One field each, except a new prompt: its length, hash and ids all differ.
    ASSERT_EQ(d.groups[0].fields.size(), c.group == FingerprintGroup::kPrompt ? 3u : 1u)
        << d.to_text();
    EXPECT_EQ(d.groups[0].fields[0].rfind(c.field + ": ", 0), 0u) << d.groups[0].fields[0];
    EXPECT_TRUE(d.outputs_identical);
    EXPECT_FALSE(d.identical());
    EXPECT_EQ(d.reproduced(), !is_input_group(c.group)) << to_string(c.group);
    EXPECT_NE(d.to_text().find(std::string("group ") + to_string(c.group) + " differs"),
              std::string::npos);
  }
}

// numerics.kv_dtype: written only when not f32 (default fingerprints keep their bytes),
// read back, and checked.
TEST(FingerprintDiff, KvDtypeRoundTripsAndIsChecked) {
  RunFingerprint a = make_fingerprint(1);
  EXPECT_EQ(a.to_json().find("kv_dtype"), std::string::npos);
  EXPECT_EQ(RunFingerprint::from_json(a.to_json()).numerics.kv_dtype, "f32");
  a.numerics.kv_dtype = "f16";
  const std::string j = a.to_json();
  EXPECT_NE(j.find("\"kv_dtype\":\"f16\""), std::string::npos) << j;
  EXPECT_EQ(RunFingerprint::from_json(j).numerics.kv_dtype, "f16");
  std::string bad = j;
  bad.replace(bad.find("\"f16\""), 5, "\"f8\"");
  try {
    RunFingerprint::from_json(bad);
    FAIL() << "kv_dtype f8 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_NE(e.message().find("kv_dtype"), std::string::npos) << e.message();
  }
}

TEST(FingerprintDiff, FirstDivergentStepWithTop5FromLogitsDumps) {
  const RunFingerprint a = make_fingerprint(3);
  RunFingerprint b = a;
  b.numerics.mode = "fast";
  diverge_at(b, 1, 4, 9);
  diverge_at(b, 0, 5, 11);  // later step in an earlier sequence: not the first
  const FingerprintDiff d = diff(a, b);
  EXPECT_FALSE(d.outputs_identical);
  EXPECT_FALSE(d.reproduced());
  EXPECT_TRUE(d.differs(FingerprintGroup::kNumerics));
  ASSERT_TRUE(d.divergence.has_value());
  const StepDivergence& v = *d.divergence;
  EXPECT_EQ(v.sequence, 1);
  EXPECT_EQ(v.step, 4);
  EXPECT_EQ(v.token_a, a.sequences[1].tokens[4]);
  EXPECT_EQ(v.token_b, 9);
  EXPECT_EQ(v.reason, "step digest differs");
  ASSERT_EQ(v.top_b.size(), 5u);
  EXPECT_EQ(v.top_b[0].token, 9);
  EXPECT_EQ(v.top_b[0].logit, 100.0f);
  ASSERT_EQ(v.top_a.size(), 5u);
  EXPECT_EQ(v.top_a, top_logits(a.sequences[1].logits[4], 5));
  const std::string text = d.to_text();
  EXPECT_NE(text.find("first divergence: sequence 1, step 4"), std::string::npos) << text;
  EXPECT_NE(text.find("top-5 b: 9:100"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(d.to_json());
  EXPECT_EQ(j["divergence"]["step"], 4);
  EXPECT_EQ(j["divergence"]["top_b"][0]["token"], 9);
}

TEST(FingerprintDiff, StepDigestsLocateADivergenceBeforeTheTokensDiffer) {
  const RunFingerprint a = at_level(make_fingerprint(4), RecordLevel::kSteps);
  RunFingerprint b = a;
  b.sequences[0].step_digests[2] ^= 1;  // same token, different logits bits
  b.sequences[0].chain_digest = chain_digest(b.sequences[0].step_digests);
  const FingerprintDiff d = diff(a, b);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->step, 2);
  EXPECT_EQ(d.divergence->token_a, d.divergence->token_b);
  EXPECT_TRUE(d.divergence->top_a.empty());  // no logits dump at this level
}

TEST(FingerprintDiff, FinalLevelAndLengthDifferences) {
  const RunFingerprint a = at_level(make_fingerprint(5), RecordLevel::kFinal);
  RunFingerprint b = a;
  b.sequences[0].chain_digest ^= 1;
  FingerprintDiff d = diff(a, b);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->step, -1);
  EXPECT_NE(d.divergence->reason.find("record per-step digests"), std::string::npos);

  b = a;
  b.sequences[1].tokens.pop_back();
  b.sequences[1].finish_reason = FinishReason::kStop;
  d = diff(a, b);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->step, 5);
  EXPECT_FALSE(d.divergence->token_b.has_value());
  EXPECT_EQ(d.divergence->reason, "sequence b ended (stop)");

  b = a;
  b.sequences.pop_back();
  d = diff(a, b);
  EXPECT_FALSE(d.outputs_identical);
  EXPECT_NE(d.output_note.find("sequence count differs: 2 vs 1"), std::string::npos);
  EXPECT_FALSE(same_output(a, b));
}

TEST(FingerprintDiff, TopLogitsOrdering) {
  const std::vector<float> row = {1.0f, NAN, 3.0f, 3.0f, -INFINITY, 2.0f, INFINITY};
  const auto top = top_logits(row, 5);
  ASSERT_EQ(top.size(), 5u);
  const std::vector<std::int32_t> want = {6, 2, 3, 5, 0};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(top[i].token, want[i]) << i;
  EXPECT_EQ(top_logits(row, 100).back().token, 1);  // NaN last
  EXPECT_TRUE(top_logits({}, 5).empty());
}

}  // namespace
}  // namespace detinfer
