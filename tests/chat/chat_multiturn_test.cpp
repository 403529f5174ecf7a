// Multi-turn reuse (docs/chat.md): when a sample finishes, the KV blocks covered by its
// prompt and generated tokens go to the prefix cache, so the next turn (previous prompt +
// reply + new message) restores them. Every turn is bitwise the same with the prefix cache
// off, cold and warm.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::TestRng;
using testing::tiny_model_dir;
using testing::tiny_options;

constexpr std::int64_t kBlock = 16;

struct Turn {
  std::vector<std::int32_t> prompt;
  GenerationResult result;
};

std::vector<std::int32_t> random_tokens(TestRng& rng, int n) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  for (auto& t : out) t = static_cast<std::int32_t>(rng.next(500));
  return out;
}

// Three turns: each prompt is the previous prompt + its reply + a new message.
std::vector<Turn> converse(DeterministicSession& s) {
  TestRng rng{23, 1};
  std::vector<Turn> turns;
  std::vector<std::int32_t> prompt = random_tokens(rng, 40);
  const int max_new[] = {24, 21, 20};
  for (int t = 0; t < 3; ++t) {
    GenerationConfig c;
    c.max_new_tokens = max_new[t];
    c.ignore_eos = true;
    if (t == 1) {  // seeded sampling in the middle turn
      c.temperature = 0.9f;
      c.top_k = 40;
      c.seed = 77;
    }
    Turn turn;
    turn.prompt = prompt;
    turn.result = s.generate(prompt, c);
    const auto& reply = turn.result.sequences.at(0).tokens;
    prompt.insert(prompt.end(), reply.begin(), reply.end());
    const std::vector<std::int32_t> message = random_tokens(rng, 9 + t);
    prompt.insert(prompt.end(), message.begin(), message.end());
    turns.push_back(std::move(turn));
  }
  return turns;
}

void expect_same(const std::vector<Turn>& want, const std::vector<Turn>& got,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t t = 0; t < want.size(); ++t) {
    EXPECT_EQ(want[t].prompt, got[t].prompt) << what << " turn " << t;
    const Sequence& a = want[t].result.sequences.at(0);
    const Sequence& b = got[t].result.sequences.at(0);
    EXPECT_EQ(a.tokens, b.tokens) << what << " turn " << t;
    EXPECT_EQ(a.step_digests, b.step_digests) << what << " turn " << t;
    EXPECT_EQ(a.digest, b.digest) << what << " turn " << t;
  }
}

TEST(MultiTurnReuse, ThreeTurnsAreBitwiseTheSameCacheOffColdAndWarm) {
  SessionOptions off = tiny_options();
  off.cache.prefix.enabled = false;
  auto uncached = DeterministicSession::open(tiny_model_dir(), off);
  const std::vector<Turn> reference = converse(uncached);
  for (const Turn& t : reference) EXPECT_EQ(t.result.cache.prefix_cached_tokens, 0);

  SessionOptions on = tiny_options();
  on.kv_block_size = kBlock;
  auto cached = DeterministicSession::open(tiny_model_dir(), on);
  const std::vector<Turn> cold = converse(cached);
  expect_same(reference, cold, "cold");
  // Turn t+1 restores every full block of turn t's prompt AND of its reply (all but the
  // last generated token have K/V), not only the blocks of turn t's prompt.
  for (std::size_t t = 1; t < cold.size(); ++t) {
    const auto covered = static_cast<std::int64_t>(cold[t - 1].prompt.size()) +
                         static_cast<std::int64_t>(cold[t - 1].result.sequences[0].tokens.size()) -
                         1;
    EXPECT_EQ(cold[t].result.cache.prefix_cached_tokens, covered / kBlock * kBlock) << "turn " << t;
    EXPECT_GT(cold[t].result.cache.prefix_cached_tokens,
              static_cast<std::int64_t>(cold[t - 1].prompt.size()) / kBlock * kBlock)
        << "turn " << t << " reused no generated token";
  }

  const std::vector<Turn> warm = converse(cached);
  expect_same(reference, warm, "warm");
  for (std::size_t t = 0; t < warm.size(); ++t) {
    EXPECT_GE(warm[t].result.cache.prefix_cached_tokens, cold[t].result.cache.prefix_cached_tokens);
  }
  EXPECT_GT(warm[0].result.cache.prefix_cached_tokens, 0);
}

TEST(MultiTurnReuse, EachSamplePublishesItsOwnContinuation) {
  // n = 3 samples each publish their own continuation; a follow-up of sample 2 hits it.
  SessionOptions on = tiny_options();
  auto s = DeterministicSession::open(tiny_model_dir(), on);
  TestRng rng{5, 9};
  const std::vector<std::int32_t> prompt = random_tokens(rng, 20);
  GenerationConfig c;
  c.max_new_tokens = 30;
  c.ignore_eos = true;
  c.temperature = 1.0f;
  c.seed = 3;
  c.num_return_sequences = 3;
  const GenerationResult r = s.generate(prompt, c);
  std::vector<std::int32_t> next = prompt;
  next.insert(next.end(), r.sequences[2].tokens.begin(), r.sequences[2].tokens.end());
  next.push_back(7);
  GenerationConfig g;
  g.max_new_tokens = 4;
  const GenerationResult follow = s.generate(next, g);
  EXPECT_EQ(follow.cache.prefix_cached_tokens, (20 + 30 - 1) / kBlock * kBlock);

  SessionOptions off = tiny_options();
  off.cache.prefix.enabled = false;
  auto plain = DeterministicSession::open(tiny_model_dir(), off);
  const GenerationResult want = plain.generate(next, g);
  EXPECT_EQ(want.sequences[0].step_digests, follow.sequences[0].step_digests);
}

}  // namespace
}  // namespace detinfer
