// Multi-turn reuse (docs/chat.md, docs/performance.md "Chat"): time to first token of
// the third turn of a conversation whose history (a 600-token first prompt, two 64-token
// replies and a 40-token message: 768 tokens) is 19x the new message (40 tokens), through
// DeterministicSession:
//   arg 0  no prefix cache: the whole 808-token prompt is prefilled;
//   arg 1  prefix cache holding the two previous PROMPTS only (what was cached before
//          generated tokens were published): the last reply and the new message prefill;
//   arg 2  multi-turn reuse: turns 1 and 2 ran on the session, so their replies' KV blocks
//          are cached too: only the new message (and a partial block) prefills.
//   bench_chat --benchmark_repetitions=3 (each repetition plays turns 1 and 2 again)
// Model: the TTFT workload's Qwen2.5-0.5B-layer shape (4 layers, bf16, 32000 tokens).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "cache/cache_test_util.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "ttft_workload.h"

namespace detinfer {
namespace {

constexpr int kFirstPrompt = 600;
constexpr int kReply = 64;
constexpr int kMessage = 40;

std::vector<std::int32_t> tokens(std::uint32_t& x, int n) {
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(bench::next_ttft_token(x));
  return out;
}

GenerationConfig reply_config(int n) {
  GenerationConfig c;
  c.max_new_tokens = n;
  c.ignore_eos = true;
  return c;
}

SessionOptions options(bool cache) {
  SessionOptions o;
  o.threads = 2;
  o.kv_budget_bytes = 1LL << 30;
  o.prefill_chunk_tokens = 512;
  o.recorder.level = RecordLevel::kOff;
  o.cache.prefix.enabled = cache;
  o.cache.prefix.memory.budget_bytes = 1LL << 30;
  return o;
}

void append(std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

// The model and the first two turns' prompts (greedy replies: the same on every session).
struct Conversation {
  testing::TempDir dir;
  std::string model = dir.path() + "/model";
  std::vector<std::int32_t> p1, m1;
  std::uint32_t x = 5;
  Conversation() {
    devtools::make_tiny_model(bench::ttft_model_options(model, core::DType::kBF16));
    p1 = tokens(x, kFirstPrompt);
    m1 = tokens(x, kMessage);
  }
};
Conversation& conversation() {
  static Conversation c;
  return c;
}

void BM_ChatTurn3Ttft(benchmark::State& state) {
  Conversation& conv = conversation();
  const int variant = static_cast<int>(state.range(0));
  // Turns 1 and 2 played on the session that serves turn 3 (variant 2), or on a scratch
  // session (the others need the same replies, not their KV).
  auto session = DeterministicSession::open(conv.model, options(variant == 2));
  std::vector<std::int32_t> p2 = conv.p1;
  append(p2, session.generate(conv.p1, reply_config(kReply)).sequences[0].tokens);
  append(p2, conv.m1);
  std::vector<std::int32_t> history = p2;
  append(history, session.generate(p2, reply_config(kReply)).sequences[0].tokens);
  if (variant == 1) {
    // Prompt-only caching: a fresh session that saw the two prompts, not the replies.
    session = DeterministicSession::open(conv.model, options(true));
    session.generate(conv.p1, reply_config(1));
    session.generate(p2, reply_config(1));
  }
  std::int64_t cached = 0;
  std::size_t prompt = 0;
  std::uint32_t x = 11;
  for (auto _ : state) {
    std::vector<std::int32_t> p3 = history;
    append(p3, tokens(x, kMessage));  // a new message every iteration: never cached
    const GenerationResult r = session.generate(p3, reply_config(1));
    cached = r.cache.prefix_cached_tokens;
    prompt = p3.size();
    state.SetIterationTime(r.timings.time_to_first_token_ms / 1000.0);
  }
  state.counters["prompt_tokens"] = static_cast<double>(prompt);
  state.counters["cached_tokens"] = static_cast<double>(cached);
}
BENCHMARK(BM_ChatTurn3Ttft)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)  // a turn-3 prompt caches its own blocks: one per setup
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace detinfer

BENCHMARK_MAIN();
