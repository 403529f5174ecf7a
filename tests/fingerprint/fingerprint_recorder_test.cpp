// FingerprintRecorder: levels, JSON Lines file, callback, concurrent writers.
#include "detinfer/fingerprint_recorder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "detinfer/error.h"
#include "fingerprint/fingerprint_test_util.h"

namespace detinfer {
namespace {

std::string temp_path(const std::string& name) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::string dir = tmp ? tmp : "/tmp";
  std::system(("mkdir -p '" + dir + "'").c_str());
  const std::string path = dir + "/" + name;
  std::remove(path.c_str());
  return path;
}

TEST(FingerprintRecorder, OffRecordsNothing) {
  int calls = 0;
  RecorderOptions o;
  o.callback = [&](const RunFingerprint&, const std::string&) { ++calls; };
  FingerprintRecorder r(o);
  EXPECT_FALSE(r.enabled());
  EXPECT_EQ(r.record(testing::make_fingerprint(1)), "");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(r.records(), 0u);
}

TEST(FingerprintRecorder, LevelsTrimWhatIsRecorded) {
  for (RecordLevel level : {RecordLevel::kFinal, RecordLevel::kSteps, RecordLevel::kLogits}) {
    RecorderOptions o;
    o.level = level;
    o.store_prompt_tokens = level != RecordLevel::kFinal;
    RunFingerprint seen;
    o.callback = [&](const RunFingerprint& fp, const std::string& line) {
      seen = fp;
      EXPECT_EQ(line, fp.to_json());
    };
    FingerprintRecorder r(o);
    EXPECT_EQ(r.wants_step_digests(), level >= RecordLevel::kSteps);
    EXPECT_EQ(r.wants_logits(), level == RecordLevel::kLogits);
    RunFingerprint fp = testing::make_fingerprint(2);
    fp.sequences[0].chain_digest = 0;  // the recorder re-chains from the step digests
    const std::string line = r.record(fp);
    const RunFingerprint back = RunFingerprint::from_json(line);
    EXPECT_EQ(static_cast<int>(back.level), static_cast<int>(level));
    EXPECT_EQ(back.sequences[0].step_digests.empty(), level < RecordLevel::kSteps);
    EXPECT_EQ(back.sequences[0].logits.empty(), level < RecordLevel::kLogits);
    EXPECT_EQ(back.sequences[0].chain_digest, chain_digest(fp.sequences[0].step_digests));
    EXPECT_EQ(back.request.prompt_tokens.has_value(), level != RecordLevel::kFinal);
    EXPECT_EQ(seen.to_json(), line);
  }
  EXPECT_EQ(parse_record_level("steps"), RecordLevel::kSteps);
  EXPECT_THROW(parse_record_level("everything"), Error);
  // One enum, one set of names: a fingerprint's level is written with the recorder's name.
  for (RecordLevel level :
       {RecordLevel::kOff, RecordLevel::kFinal, RecordLevel::kSteps, RecordLevel::kLogits}) {
    EXPECT_EQ(parse_record_level(to_string(level)), level);
  }
  RunFingerprint fp = testing::make_fingerprint(1);
  fp.level = RecordLevel::kFinal;
  EXPECT_NE(fp.to_json().find("\"level\":\"final\""), std::string::npos) << fp.to_json();
  // The C numbering (dti_session_options.fingerprint_level) is the enum's.
  EXPECT_EQ(static_cast<int>(kDefaultRecordLevel), 2);
}

TEST(FingerprintRecorder, ConcurrentRecordsAreWholeJsonLines) {
  const std::string path = temp_path("recorder.jsonl");
  RecorderOptions o;
  o.level = RecordLevel::kSteps;
  o.path = path;
  {
    FingerprintRecorder r(o);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&r, t] {
        for (int i = 0; i < 10; ++i) r.record(testing::make_fingerprint(100 * t + i, 1, 40, 64));
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(r.records(), 40u);
  }
  const auto all = load_fingerprints(path);
  ASSERT_EQ(all.size(), 40u);
  // Appends: a second recorder adds to the same file.
  FingerprintRecorder(o).record(testing::make_fingerprint(9));
  EXPECT_EQ(load_fingerprints(path).size(), 41u);
}

TEST(FingerprintRecorder, UnwritablePathIsAnError) {
  RecorderOptions o;
  o.level = RecordLevel::kFinal;
  o.path = "/nonexistent-dir/x.jsonl";
  try {
    FingerprintRecorder r(o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(e.message().find("/nonexistent-dir/x.jsonl"), std::string::npos);
  }
}

}  // namespace
}  // namespace detinfer

namespace detinfer {
namespace {

TEST(FingerprintOf, TakesRequestAndOutputFromAResult) {
  const RunFingerprint base = testing::make_fingerprint(4);
  GenerationConfig config;
  config.temperature = 0.5f;
  config.seed = 99;  // ignored: result.seed is what ran
  GenerationResult res;
  res.prompt_tokens = {3, 1, 4, 1, 5};
  res.seed = 1234;
  res.sequences.resize(1);
  res.sequences[0].tokens = {9, 2, 6};
  res.sequences[0].finish_reason = FinishReason::kStop;
  res.sequences[0].step_digests = {11, 22, 33};
  res.sequences[0].digest = chain_digest(res.sequences[0].step_digests);
  res.cache.result_cache_hit = true;
  const RunFingerprint fp = fingerprint_of(base, config, res, /*store_prompt_tokens=*/false);
  EXPECT_EQ(fp.model.fingerprint, base.model.fingerprint);
  EXPECT_EQ(fp.environment.hash(), base.environment.hash());
  EXPECT_FALSE(fp.request.prompt_tokens.has_value());
  EXPECT_EQ(fp.request.prompt_hash, prompt_hash(res.prompt_tokens));
  EXPECT_EQ(fp.request.seed, 1234u);
  EXPECT_FALSE(fp.request.config.seed.has_value());
  EXPECT_EQ(fp.request.config.temperature, 0.5f);
  ASSERT_EQ(fp.sequences.size(), 1u);
  EXPECT_EQ(fp.sequences[0].step_digests, res.sequences[0].step_digests);
  EXPECT_TRUE(fp.cache.result_cache_hit);
  // Valid as written: from_json re-checks the chain against the step digests.
  EXPECT_EQ(RunFingerprint::from_json(fp.to_json()).to_json(), fp.to_json());
}

}  // namespace
}  // namespace detinfer
