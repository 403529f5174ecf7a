// Speculative decoding through the session (docs/speculative.md) on the tiny model: with
// the n-gram drafter on, every output (tokens, text, step digests, logprobs, finish
// reason) is bitwise the output with it off, for greedy and seeded sampling, draft lengths
// 1..8, the prefix cache off/cold/warm, 1 and 2 threads, structured output and batches
// that mix speculating and plain requests; and drafts are really accepted.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::expect_identical;
using testing::metric;
using testing::tiny_model_dir;
using testing::tiny_options;

// Text with repeated phrases, so that the prompt-lookup drafter finds matches.
const char* const kRepeating =
    "the cat sat on the mat. the cat sat on the mat. the dog sat on the log. the cat sat on";

std::vector<GenerationConfig> configs() { return testing::greedy_seeded_and_n2(40); }

SessionOptions no_prefix_cache(std::int32_t threads = 1) {
  SessionOptions o = tiny_options(threads);
  o.cache.prefix.enabled = false;
  return o;
}

TEST(SessionSpeculative, EveryDraftLengthGivesPlainDecodingsOutputAndAcceptsDrafts) {
  auto s = DeterministicSession::open(tiny_model_dir(), no_prefix_cache());
  for (const GenerationConfig& plain : configs()) {
    const GenerationResult ref = s.generate(kRepeating, plain);
    for (std::int32_t k = 1; k <= 8; ++k) {
      GenerationConfig c = plain;
      c.draft_tokens = k;
      expect_identical(ref, s.generate(kRepeating, c), "draft_tokens " + std::to_string(k));
    }
  }
  const SessionStats st = s.stats();
  RecordProperty("draft_tokens", std::to_string(st.draft_tokens));
  RecordProperty("accepted_draft_tokens", std::to_string(st.accepted_draft_tokens));
  EXPECT_GT(st.draft_tokens, 0);
  // The test exercises acceptance, not only rejection.
  EXPECT_GT(st.accepted_draft_tokens, 0);
  EXPECT_LE(st.accepted_draft_tokens, st.draft_tokens);
  // All of it is the n-gram drafter's: per-drafter stats and series.
  EXPECT_EQ(st.ngram_drafts.drafted, st.draft_tokens);
  EXPECT_EQ(st.ngram_drafts.accepted, st.accepted_draft_tokens);
  EXPECT_EQ(st.model_drafts.drafted, 0);
  const std::string m = s.metrics_text();
  EXPECT_EQ(metric(m, "detinfer_speculative_draft_tokens_total{drafter=\"ngram\"}"),
            static_cast<double>(st.draft_tokens));
  EXPECT_EQ(metric(m, "detinfer_speculative_accepted_tokens_total{drafter=\"ngram\"}"),
            static_cast<double>(st.accepted_draft_tokens));
  EXPECT_EQ(metric(m, "detinfer_speculative_acceptance_ratio{drafter=\"ngram\"}"),
            static_cast<double>(st.accepted_draft_tokens) / static_cast<double>(st.draft_tokens));
  EXPECT_EQ(metric(m, "detinfer_speculative_draft_tokens_total{drafter=\"model\"}"), 0.0);
  EXPECT_EQ(metric(m, "detinfer_speculative_acceptance_ratio{drafter=\"model\"}"), 0.0);
}

TEST(SessionSpeculative, NgramBoundsStopStringsAndEosChangeNothing) {
  auto s = DeterministicSession::open(tiny_model_dir(), no_prefix_cache());
  GenerationConfig plain = configs()[0];
  const GenerationResult full = s.generate(kRepeating, plain);
  const std::string& text = full.sequences[0].text;
  ASSERT_GE(text.size(), 12u);
  plain.stop_strings = {text.substr(8, 3)};  // a stop string the output really meets
  plain.ignore_eos = false;
  const GenerationResult ref = s.generate(kRepeating, plain);
  EXPECT_EQ(ref.sequences[0].finish_reason, FinishReason::kStop);
  for (std::int32_t lo : {1, 2}) {
    for (std::int32_t hi : {2, 4, 8}) {
      GenerationConfig c = plain;
      c.draft_tokens = 5;
      c.draft_ngram_min = lo;
      c.draft_ngram_max = hi;
      expect_identical(ref, s.generate(kRepeating, c),
                       "ngram " + std::to_string(lo) + ".." + std::to_string(hi));
    }
  }
}

TEST(SessionSpeculative, PrefixCacheOffColdWarmAndThreadsGiveTheSameBits) {
  auto off = DeterministicSession::open(tiny_model_dir(), no_prefix_cache());
  std::vector<GenerationResult> refs;
  for (const GenerationConfig& c : configs()) refs.push_back(off.generate(kRepeating, c));
  for (std::int32_t threads : {1, 2}) {
    auto s = DeterministicSession::open(tiny_model_dir(), tiny_options(threads));
    for (const char* pass : {"cold", "warm"}) {
      for (std::size_t i = 0; i < refs.size(); ++i) {
        GenerationConfig c = configs()[i];
        c.draft_tokens = 4;
        const GenerationResult r = s.generate(kRepeating, c);
        expect_identical(refs[i], r,
                         std::string(pass) + " threads " + std::to_string(threads) + " config " +
                             std::to_string(i));
        if (std::string(pass) == "warm") {
          EXPECT_GT(r.cache.prefix_cached_tokens, 0);
        }
      }
    }
    EXPECT_GT(s.stats().accepted_draft_tokens, 0);
  }
}

TEST(SessionSpeculative, KvPublishedBySpeculatingRunsServesTheNextTurnBitwise) {
  // A speculating sample publishes the K/V of its prompt and generated tokens; rejected
  // drafts' K/V must not be among them. The next turn (prompt + reply + more) restores
  // those blocks and must compute what an uncached session computes.
  GenerationConfig c = configs()[0];
  c.max_new_tokens = 48;
  c.logprobs = 0;
  auto cached = DeterministicSession::open(tiny_model_dir(), tiny_options());
  auto uncached = DeterministicSession::open(tiny_model_dir(), no_prefix_cache());
  GenerationConfig spec = c;
  spec.draft_tokens = 6;
  const std::vector<std::int32_t> prompt = cached.encode(kRepeating);
  const GenerationResult first = cached.generate(prompt, spec);
  ASSERT_GT(cached.stats().draft_tokens, 0);
  std::vector<std::int32_t> next = prompt;
  next.insert(next.end(), first.sequences[0].tokens.begin(), first.sequences[0].tokens.end());
  const std::vector<std::int32_t> more = cached.encode(" and then the cat");
  next.insert(next.end(), more.begin(), more.end());
  const GenerationResult warm = cached.generate(next, c);
  EXPECT_GT(warm.cache.prefix_cached_tokens, static_cast<std::int64_t>(prompt.size()));
  expect_identical(uncached.generate(next, c), warm, "next turn");
}

TEST(SessionSpeculative, StructuredOutputKeepsItsMaskAtEveryDraftedPosition) {
  auto s = DeterministicSession::open(tiny_model_dir(), no_prefix_cache());
  GenerationConfig plain;
  plain.max_new_tokens = 40;
  plain.response_format.type = ResponseFormatType::kJsonObject;
  plain.logprobs = 2;
  const std::string prompt = "{\"a\": 1, \"b\": 2} {\"a\": 1, \"b\": 2} {\"a\": 1,";
  const GenerationResult ref = s.generate(prompt, plain);
  for (std::int32_t k : {1, 4, 8}) {
    GenerationConfig c = plain;
    c.draft_tokens = k;
    expect_identical(ref, s.generate(prompt, c), "json_object draft " + std::to_string(k));
  }
}

TEST(SessionSpeculative, BatchOfSpeculatingAndPlainRequestsEqualsEachAlone) {
  auto s = DeterministicSession::open(tiny_model_dir(), no_prefix_cache(2));
  const std::vector<std::string> prompts = {kRepeating, "one two three one two three one",
                                            "a b c d e f g a b c d", "hello hello hello"};
  std::vector<GenerationConfig> cs;
  std::vector<GenerationResult> alone;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    GenerationConfig c = configs()[i % 3];
    c.max_new_tokens = 24;
    alone.push_back(s.generate(prompts[i], c));
    if (i % 2 == 0) c.draft_tokens = 3 + static_cast<std::int32_t>(i);
    cs.push_back(c);
  }
  std::vector<RequestHandle> hs;
  for (std::size_t i = 0; i < prompts.size(); ++i) hs.push_back(s.submit(prompts[i], cs[i]));
  for (std::size_t i = 0; i < hs.size(); ++i) {
    expect_identical(alone[i], hs[i].get(), "batched request " + std::to_string(i));
  }
}

TEST(SessionSpeculative, BeamSearchAndBadOptionsAreRefusedNamingTheField) {
  auto s = DeterministicSession::open(tiny_model_dir(), no_prefix_cache());
  GenerationConfig c;
  c.num_beams = 2;
  c.draft_tokens = 4;
  try {
    s.generate("hello", c);
    FAIL() << "beam search with speculative decoding ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "draft_tokens");
  }
  GenerationConfig bad;
  bad.draft_tokens = 9;
  EXPECT_THROW(s.generate("hello", bad), Error);
}

}  // namespace
}  // namespace detinfer
