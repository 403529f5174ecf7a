// KV admission with deterministic preemption through the session on the tiny model
// (docs/session.md, "KV admission and preemption"): many concurrent requests with large
// max_new_tokens and short prompts on a KV pool that could not reserve them up front all
// complete, each bitwise equal (tokens, text, step digests, logprob bits, finish reason)
// to its run alone, streamed tokens arrive once each, and the preemptions show in
// SessionStats and /metrics. The traffic mixes greedy, seeded sampling with a repetition
// penalty, n = 2, a stop string, JSON-constrained decoding and logprobs; with the prefix
// cache off (everything recomputed) and on (resumed samples restore their blocks).
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <string>
#include <vector>

#include "common/gate.h"
#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::expect_identical;
using testing::Gate;
using testing::metric;
using testing::tiny_model_dir;
using testing::tiny_options;

// What one request streamed (engine thread; read after its result).
struct Streamed {
  std::map<std::pair<std::int32_t, std::int32_t>, int> count;  // (sample, step) -> events
  std::map<std::int32_t, std::string> text;                    // sample -> text
};

GenerationConfig kind_config(int kind, const std::string& stop) {
  GenerationConfig c;
  c.max_new_tokens = 160;
  c.ignore_eos = true;
  switch (kind % 6) {
    case 0:
      break;  // greedy
    case 1:
      c.temperature = 0.8f;
      c.top_k = 40;
      c.repetition_penalty = 1.3f;
      c.seed = 17 + kind;
      break;
    case 2:
      c.temperature = 1.0f;
      c.top_p = 0.9f;
      c.num_return_sequences = 2;
      c.max_new_tokens = 96;
      c.seed = 3 + kind;
      break;
    case 3:
      c.stop_strings = {stop};
      break;
    case 4:  // constrained decoding: the grammar state is carried across a preemption
      c.response_format.type = ResponseFormatType::kJsonObject;
      c.ignore_eos = false;
      c.temperature = 0.9f;
      c.seed = 41 + kind;
      break;
    default:
      c.logprobs = 2;
      c.temperature = 0.7f;
      c.seed = 9;
      break;
  }
  return c;
}

// Every streamed token arrived once, and the streamed text is the result's.
void expect_streamed_once(const Streamed& st, const GenerationResult& r, const std::string& what) {
  std::size_t events = 0;
  for (std::size_t k = 0; k < r.sequences.size(); ++k) {
    const Sequence& seq = r.sequences[k];
    for (std::size_t t = 0; t < seq.tokens.size(); ++t) {
      const std::pair<std::int32_t, std::int32_t> key{static_cast<std::int32_t>(k),
                                                      static_cast<std::int32_t>(t)};
      const auto it = st.count.find(key);
      EXPECT_TRUE(it != st.count.end() && it->second == 1)
          << what << " sample " << k << " step " << t;
    }
    events += seq.tokens.size();
    const auto text = st.text.find(static_cast<std::int32_t>(k));
    EXPECT_EQ(text == st.text.end() ? std::string() : text->second, seq.text) << what;
  }
  EXPECT_EQ(st.count.size(), events) << what;
}

// 12 requests of up to 160 tokens (n = 2 for some) queued behind a blocker, so that all
// are admitted by their prompts at once on a 40-block pool (one needs at most 14 blocks,
// 20 for n = 2; together ~170): the pool runs out and requests are preempted. Each result
// must equal the request's run alone in a session with a large pool.
void run_preempted_traffic(bool prefix_cache) {
  DeterministicSession solo = DeterministicSession::open(tiny_model_dir(), tiny_options());
  SessionOptions small = tiny_options();
  small.kv_budget_bytes = solo.footprint().kv_bytes_per_token * small.kv_block_size * 40;
  small.cache.prefix.enabled = prefix_cache;
  DeterministicSession s = DeterministicSession::open(tiny_model_dir(), small);
  ASSERT_EQ(s.stats().kv_blocks_capacity, 40);

  // A stop string from the middle of a greedy output, so that the stop request stops
  // part-way, its stop-matcher state carried across any preemption.
  GenerationConfig greedy;
  greedy.max_new_tokens = 160;
  greedy.ignore_eos = true;
  const std::string probe = solo.generate("a stop probe", greedy).sequences[0].text;
  ASSERT_GT(probe.size(), 20u);
  const std::string stop = probe.substr(probe.size() * 3 / 5, 2);

  std::vector<std::string> prompts;
  std::vector<GenerationConfig> configs;
  for (int i = 0; i < 12; ++i) {
    prompts.push_back("request " + std::to_string(i) + " says");
    configs.push_back(kind_config(i, stop));
  }
  Gate gate;
  GenerationConfig one;
  one.max_new_tokens = 1;
  RequestHandle blocker = s.submit("hold", one, gate.callback());
  gate.wait_entered();
  std::vector<Streamed> streams(prompts.size());
  std::vector<RequestHandle> handles;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Streamed* st = &streams[i];
    handles.push_back(s.submit(prompts[i], configs[i], [st](const TokenEvent& ev) {
      ++st->count[{ev.sample_index, ev.step}];
      st->text[ev.sample_index] += ev.text;
      return true;
    }));
  }
  gate.release();
  blocker.get();
  std::vector<GenerationResult> results;
  for (auto& h : handles) results.push_back(h.get());

  const SessionStats stats = s.stats();
  EXPECT_GT(stats.preemptions, 0) << "the pool must have run out";
  EXPECT_EQ(stats.resumptions, stats.preemptions);
  EXPECT_EQ(stats.kv_blocks_in_use, 0);
  const std::string m = s.metrics_text();
  EXPECT_EQ(metric(m, "detinfer_preemptions_total"), static_cast<double>(stats.preemptions));
  EXPECT_EQ(metric(m, "detinfer_resumptions_total"), static_cast<double>(stats.resumptions));
  EXPECT_EQ(metric(solo.metrics_text(), "detinfer_preemptions_total"), 0.0);
  // No two prompts share a block: every prefix-cache hit is a resumed sample's own
  // blocks, published when it was preempted.
  if (prefix_cache) {
    EXPECT_GT(s.cache_stats().prefix.cached_tokens, 0) << "resumptions restore their blocks";
  } else {
    EXPECT_EQ(s.cache_stats().prefix.cached_tokens, 0);
  }

  bool stopped = false;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::string what = "request " + std::to_string(i);
    expect_identical(solo.generate(prompts[i], configs[i]), results[i], what);
    expect_streamed_once(streams[i], results[i], what);
    for (const Sequence& seq : results[i].sequences) {
      if (!configs[i].stop_strings.empty() && seq.finish_reason == FinishReason::kStop) {
        stopped = true;
      }
    }
  }
  EXPECT_TRUE(stopped) << "the stop string must end a request";
}

TEST(SessionPreemption, LongRequestsOnASmallPoolEqualAloneRecomputingEverything) {
  run_preempted_traffic(false);
}

TEST(SessionPreemption, LongRequestsOnASmallPoolEqualAloneRestoringFromThePrefixCache) {
  run_preempted_traffic(true);
}

}  // namespace
}  // namespace detinfer
