// Fingerprints, replay, metrics and the consistency monitor wired into
// DeterministicSession: every result carries its fingerprint, a fingerprint replays as
// reproduced on another session with another thread count under concurrent load, and
// replay/diff name the right group or first divergent step when something changed.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "detinfer/fingerprint_diff.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "session/flipped_model.h"
#include "session/session_internal.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::metric;
using testing::random_config;
using testing::random_ids;
using testing::TestRng;
using testing::tiny_model_dir;
using testing::tiny_options;

std::string tmp_path(const std::string& name) {
  const char* t = std::getenv("DETINFER_TEST_TMP");
  return std::string(t != nullptr ? t : "/tmp") + "/session-fp-" + name;
}

std::vector<std::int32_t> prompt_of(std::size_t n, std::int32_t salt) {
  std::vector<std::int32_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>((i * 31 + salt) % 512);
  return p;
}

GenerationConfig sampled_config() {
  GenerationConfig c;
  c.max_new_tokens = 16;
  c.temperature = 0.9f;
  c.top_k = 40;
  c.seed = 1234;
  c.ignore_eos = true;
  return c;
}

TEST(SessionFingerprint, EveryResultCarriesItsFingerprintByDefault) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const GenerationResult r = s.generate(prompt_of(20, 1), sampled_config());
  ASSERT_FALSE(r.fingerprint_json.empty());
  const RunFingerprint fp = RunFingerprint::from_json(r.fingerprint_json);
  EXPECT_EQ(fp.model.fingerprint.hex(), s.model_fingerprint());
  EXPECT_EQ(fp.tokenizer_hash.hex(), s.tokenizer_hash());
  EXPECT_EQ(fp.numerics.mode, "canonical");
  EXPECT_EQ(fp.numerics.threads, 1);
  EXPECT_FALSE(fp.numerics.kernel_isa.empty());
  EXPECT_EQ(fp.level, RecordLevel::kSteps);
  EXPECT_EQ(fp.request.seed, 1234u);
  ASSERT_EQ(fp.sequences.size(), 1u);
  EXPECT_EQ(fp.sequences[0].tokens, r.sequences[0].tokens);
  EXPECT_EQ(fp.sequences[0].step_digests, r.sequences[0].step_digests);
  EXPECT_EQ(fp.sequences[0].chain_digest, r.sequences[0].digest);

  SessionOptions off = tiny_options();
  off.recorder.level = RecordLevel::kOff;
  auto quiet = DeterministicSession::open(tiny_model_dir(), off);
  EXPECT_TRUE(quiet.generate(prompt_of(20, 1), sampled_config()).fingerprint_json.empty());
}

TEST(SessionFingerprint, RecorderFileCallbackAndLogitsLevel) {
  const std::string path = tmp_path("recorder.jsonl");
  std::remove(path.c_str());
  SessionOptions o = tiny_options();
  o.recorder.level = RecordLevel::kLogits;
  o.recorder.path = path;
  int calls = 0;
  o.recorder.callback = [&](const RunFingerprint&, const std::string&) { ++calls; };
  auto s = DeterministicSession::open(tiny_model_dir(), o);
  GenerationConfig c = sampled_config();
  c.num_return_sequences = 2;
  c.max_new_tokens = 5;
  const GenerationResult r = s.generate(prompt_of(9, 2), c);
  s.generate(prompt_of(5, 3), c);
  EXPECT_EQ(calls, 2);
  const auto all = load_fingerprints(path);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].to_json(), RunFingerprint::from_json(r.fingerprint_json).to_json());
  ASSERT_EQ(all[0].sequences.size(), 2u);
  for (const FingerprintSequence& seq : all[0].sequences) {
    ASSERT_EQ(seq.logits.size(), seq.tokens.size());
    for (std::size_t t = 0; t < seq.tokens.size(); ++t) {
      EXPECT_EQ(logits_digest(seq.logits[t].data(), seq.logits[t].size()), seq.step_digests[t]);
    }
  }
}

TEST(SessionFingerprint, ReplaysAsReproducedWithOtherThreadsUnderLoad) {
  std::string json;
  {
    auto a = DeterministicSession::open(tiny_model_dir(), tiny_options(1));
    json = a.generate(prompt_of(40, 4), sampled_config()).fingerprint_json;
  }
  auto b = DeterministicSession::open(tiny_model_dir(), tiny_options(2));
  TestRng rng{5, 9};
  std::vector<RequestHandle> load;
  for (int i = 0; i < 8; ++i) {
    load.push_back(b.submit(random_ids(rng, 60, 512), random_config(rng)));
  }
  const ReplayReport rep = b.replay(json);
  for (auto& h : load) h.get();
  EXPECT_EQ(rep.verdict, ReplayVerdict::kReproduced) << rep.to_text();
  ASSERT_TRUE(rep.replayed.has_value());
  EXPECT_EQ(rep.replayed->numerics.threads, 2);
  EXPECT_TRUE(rep.diff.differs(FingerprintGroup::kNumerics));  // threads: run context only
  EXPECT_NE(metric(b.metrics_text(), "detinfer_replay_checks_total{result=\"match\"}"), 0);
}

TEST(SessionFingerprint, ReplayRefusesAnotherModelOrTokenizer) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const std::string json = s.generate(prompt_of(12, 5), sampled_config()).fingerprint_json;

  // The same model folder with one weight byte flipped.
  const std::string dir = testing::flipped_model_copy(tiny_model_dir(), tmp_path("flipped-model"));
  auto flipped = DeterministicSession::open(dir, tiny_options());
  ASSERT_NE(flipped.model_fingerprint(), s.model_fingerprint());
  const ReplayReport m = flipped.replay(json);
  EXPECT_EQ(m.verdict, ReplayVerdict::kRefused);
  EXPECT_NE(m.reason.find("model differs"), std::string::npos) << m.reason;
  EXPECT_FALSE(m.replayed.has_value());

  RunFingerprint other_tok = RunFingerprint::from_json(json);
  other_tok.tokenizer_hash = Hash128{1, 2};
  const ReplayReport t = s.replay(other_tok);
  EXPECT_EQ(t.verdict, ReplayVerdict::kRefused);
  EXPECT_NE(t.reason.find("tokenizer differs"), std::string::npos) << t.reason;

  RunFingerprint no_prompt = RunFingerprint::from_json(json);
  no_prompt.request.prompt_tokens.reset();
  EXPECT_EQ(s.replay(no_prompt).verdict, ReplayVerdict::kRefused);
}

TEST(SessionFingerprint, ChangedConfigFieldDivergesAndDiffNamesTheGroup) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const GenerationResult r = s.generate(prompt_of(12, 6), sampled_config());
  RunFingerprint edited = RunFingerprint::from_json(r.fingerprint_json);
  edited.request.config.temperature = 1.7f;  // the recorded output no longer belongs to it
  const ReplayReport rep = s.replay(edited);
  EXPECT_EQ(rep.verdict, ReplayVerdict::kDiverged) << rep.to_text();
  ASSERT_TRUE(rep.diff.divergence.has_value()) << rep.to_text();
  EXPECT_GE(rep.diff.divergence->step, 0);
  EXPECT_NE(rep.reason.find("first divergence"), std::string::npos) << rep.reason;

  GenerationConfig c = sampled_config();
  c.top_k = 7;
  const GenerationResult other = s.generate(prompt_of(12, 6), c);
  const FingerprintDiff d = diff(RunFingerprint::from_json(r.fingerprint_json),
                                 RunFingerprint::from_json(other.fingerprint_json));
  EXPECT_TRUE(d.differs(FingerprintGroup::kConfig)) << d.to_text();
  EXPECT_FALSE(d.reproduced());
}

TEST(SessionFingerprint, FastModeReplayAndDiffNameNumericsAndFirstDivergentStep) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "built with DETINFER_WITH_TORCH=OFF: no fast mode";
  auto canonical = DeterministicSession::open(tiny_model_dir(), tiny_options());
  GenerationConfig c;
  c.max_new_tokens = 12;
  c.ignore_eos = true;
  const GenerationResult cr = canonical.generate(prompt_of(30, 7), c);
  SessionOptions fo = tiny_options();
  fo.mode = NumericsMode::kFast;
  auto fast = DeterministicSession::open(tiny_model_dir(), fo);
  const ReplayReport rep = fast.replay(cr.fingerprint_json);
  EXPECT_EQ(rep.verdict, ReplayVerdict::kDiverged) << rep.to_text();
  EXPECT_TRUE(rep.diff.differs(FingerprintGroup::kNumerics));

  const GenerationResult fr = fast.generate(prompt_of(30, 7), c);
  const FingerprintDiff d = diff(RunFingerprint::from_json(cr.fingerprint_json),
                                 RunFingerprint::from_json(fr.fingerprint_json));
  EXPECT_TRUE(d.differs(FingerprintGroup::kNumerics));
  if (!d.outputs_identical) {
    ASSERT_TRUE(d.divergence.has_value()) << d.to_text();
    EXPECT_GE(d.divergence->step, 0);
    EXPECT_TRUE(d.divergence->digest_a.has_value());
  }
}

TEST(SessionFingerprint, MetricsMoveAsRequestsRun) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const std::string before = s.metrics_text();
  EXPECT_NE(before.find("# TYPE detinfer_requests_total counter"), std::string::npos) << before;
  EXPECT_EQ(metric(before, "detinfer_requests_total{finish_reason=\"length\"}"), 0);
  GenerationConfig c;
  c.max_new_tokens = 6;
  c.ignore_eos = true;
  const auto p = prompt_of(50, 8);
  s.generate(p, c);
  s.generate(p, c);  // the second reuses the first's prefix blocks
  const std::string after = s.metrics_text();
  EXPECT_EQ(metric(after, "detinfer_requests_total{finish_reason=\"length\"}"), 2);
  EXPECT_EQ(metric(after, "detinfer_generated_tokens_total"), 12);
  EXPECT_EQ(metric(after, "detinfer_prompt_tokens_total"), 100);
  EXPECT_EQ(metric(after, "detinfer_prefix_cached_tokens_total"), 48);
  EXPECT_EQ(metric(after, "detinfer_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(metric(after, "detinfer_inter_token_latency_seconds_count"), 10);
  EXPECT_GT(metric(after, "detinfer_batch_size_count"), 0);
  EXPECT_GT(metric(after, "detinfer_kv_blocks_capacity"), 0);
  EXPECT_EQ(metric(after, "detinfer_cache_hits_total{cache=\"prefix\"}"), 3);
  EXPECT_GT(metric(after, "detinfer_cache_bytes{cache=\"prefix\"}"), 0);
  // The registry itself (the engine's last on_step may still move the gauges).
  EXPECT_EQ(metric(s.metrics().render(), "detinfer_generated_tokens_total"), 12);
}

TEST(SessionFingerprint, ConsistencyMonitorReportsOneOnRealShadowReplays) {
  SessionOptions o = tiny_options();
  o.consistency.enabled = true;
  o.consistency.monitor.sample_rate = 1.0;
  int alarms = 0;
  o.consistency.alarm = [&](const RunFingerprint&, const RunFingerprint&, double) { ++alarms; };
  auto s = DeterministicSession::open(tiny_model_dir(), o);
  TestRng rng{8, 1};
  std::vector<RequestHandle> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(s.submit(random_ids(rng, 40, 512), random_config(rng)));
  for (auto& h : hs) h.get();
  SessionInternals::of(s).monitor->drain();
  const ConsistencyStats st = s.consistency_stats();
  EXPECT_EQ(st.checks, 6u);
  EXPECT_EQ(st.matches, 6u);
  EXPECT_EQ(st.errors, 0u);
  EXPECT_EQ(st.ratio, 1.0);
  EXPECT_EQ(alarms, 0);
  const std::string text = s.metrics_text();
  EXPECT_EQ(metric(text, "detinfer_consistency_ratio"), 1.0);
  EXPECT_EQ(metric(text, "detinfer_replay_checks_total{result=\"match\"}"), 6);
  // Shadow replays are not served requests.
  EXPECT_EQ(metric(text, "detinfer_requests_total{finish_reason=\"length\"}") +
                metric(text, "detinfer_requests_total{finish_reason=\"stop\"}"),
            6);
}

}  // namespace
}  // namespace detinfer

namespace detinfer {
namespace {

void expect_same_tier(const CacheTierStats& a, const CacheTierStats& b, const char* tier) {
  SCOPED_TRACE(tier);
  EXPECT_EQ(a.hits, b.hits);
  EXPECT_EQ(a.misses, b.misses);
  EXPECT_EQ(a.insertions, b.insertions);
  EXPECT_EQ(a.entries, b.entries);
  EXPECT_EQ(a.bytes, b.bytes);
}

// A replay's request carries the policy use_caches = false, observed = false: it neither
// asks nor fills either cache, and no metric, recorder line or distribution sample counts
// it (only the replay verdict does).
TEST(SessionFingerprint, ReplayLeavesMetricsRecorderAndCachesUntouched) {
  SessionOptions o = tiny_options();
  o.cache.result.enabled = true;
  o.distribution_interval = 1;
  int records = 0;
  o.recorder.callback = [&](const RunFingerprint&, const std::string&) { ++records; };
  auto s = DeterministicSession::open(tiny_model_dir(), o);
  const GenerationResult r = s.generate(prompt_of(40, 3), sampled_config());
  ASSERT_EQ(records, 1);
  // Empty caches: a replay that used them would miss in both and then fill both.
  s.invalidate_caches();
  const CacheStats before = s.cache_stats();
  const std::string m0 = s.metrics_text();
  ASSERT_EQ(metric(m0, "detinfer_requests_total{finish_reason=\"length\"}"), 1);

  const ReplayReport rep = s.replay(r.fingerprint_json);
  ASSERT_TRUE(rep.reproduced()) << rep.to_text();

  EXPECT_EQ(records, 1);
  const CacheStats after = s.cache_stats();
  EXPECT_EQ(after.prefix.lookups, before.prefix.lookups);
  EXPECT_EQ(after.prefix.cached_tokens, before.prefix.cached_tokens);
  expect_same_tier(after.prefix.memory, before.prefix.memory, "prefix memory");
  expect_same_tier(after.result.memory, before.result.memory, "result memory");
  const std::string m1 = s.metrics_text();
  for (const char* series :
       {"detinfer_requests_total{finish_reason=\"length\"}", "detinfer_generated_tokens_total",
        "detinfer_prompt_tokens_total", "detinfer_prefix_cached_tokens_total",
        "detinfer_time_to_first_token_seconds_count", "detinfer_inter_token_latency_seconds_count",
        "detinfer_top1_probability_count", "detinfer_requests_failed_total",
        "detinfer_cache_hits_total{cache=\"prefix\"}",
        "detinfer_cache_misses_total{cache=\"prefix\"}",
        "detinfer_cache_hits_total{cache=\"result\"}",
        "detinfer_cache_misses_total{cache=\"result\"}"}) {
    EXPECT_EQ(metric(m1, series), metric(m0, series)) << series;
  }
  EXPECT_GT(metric(m1, "detinfer_top1_probability_count"), 0);
  EXPECT_EQ(metric(m1, "detinfer_replay_checks_total{result=\"match\"}"), 1);

  // The same request served normally does use the (now empty) caches: the check above can
  // fail.
  s.generate(prompt_of(40, 3), sampled_config());
  EXPECT_GT(s.cache_stats().result.memory.insertions, before.result.memory.insertions);
  EXPECT_GT(s.cache_stats().prefix.lookups, before.prefix.lookups);
  EXPECT_EQ(records, 2);
}

}  // namespace
}  // namespace detinfer
