// Sliding-window models generate past their window (issue 29 item 5): a Mistral model with
// a window of 8, a Qwen2 model with one windowed layer and Gemma 2 / Gemma 3 models
// generate 10x the window with the same tokens and digests with the prefix cache off, cold
// and warm, prefilled in chunks of 3 or at once, on 1 or 2 threads, alone or batched with
// other requests. A model whose every layer slides keeps its KV within the window, in
// canonical and in fast mode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/gate.h"
#include "detinfer/philox.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"

namespace detinfer {
namespace {

constexpr std::int64_t kWindow = 8;

std::string window_model(devtools::TinyArch arch, const char* name) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  devtools::TinyModelOptions o;
  o.arch = arch;
  o.out_dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/window-" + name + "-" +
              std::to_string(static_cast<long>(getpid()));
  o.layers = 3;
  o.max_positions = 256;
  o.sliding_window = kWindow;
  o.seed = 23;
  if (arch == devtools::TinyArch::kGemma2 || arch == devtools::TinyArch::kGemma3) {
    o.tie_word_embeddings = true;
    o.head_dim = 16;
    o.attn_logit_softcapping = arch == devtools::TinyArch::kGemma2 ? 20.0 : 0.0;
    o.final_logit_softcapping = arch == devtools::TinyArch::kGemma2 ? 15.0 : 0.0;
    o.sliding_window_pattern = 3;
  }
  devtools::make_tiny_model(o);
  if (arch == devtools::TinyArch::kQwen2) {  // only the last layer slides
    std::ifstream in(o.out_dir + "/config.json");
    nlohmann::json c = nlohmann::json::parse(in);
    c["max_window_layers"] = 2;
    std::ofstream(o.out_dir + "/config.json") << c.dump();
  }
  return o.out_dir;
}

std::vector<std::int32_t> prompt(std::uint64_t seed, std::size_t n) {
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = static_cast<std::int32_t>(philox_block(seed, i, 0)[0] % 500);
  return ids;
}

SessionOptions options(std::int32_t chunk, bool prefix_cache, std::int32_t threads) {
  SessionOptions o;
  o.threads = threads;
  o.max_batch = 4;
  o.prefill_chunk_tokens = chunk;
  o.cache.prefix.enabled = prefix_cache;
  o.recorder.level = RecordLevel::kOff;
  return o;
}

GenerationConfig sampled(std::uint64_t seed) {
  GenerationConfig g;
  g.max_new_tokens = 10 * kWindow;  // well past the window
  g.ignore_eos = true;
  g.temperature = 0.8f;
  g.seed = seed;
  return g;
}

void expect_same(const GenerationResult& a, const GenerationResult& b, const std::string& what) {
  ASSERT_EQ(a.sequences.size(), 1u) << what;
  ASSERT_EQ(b.sequences.size(), 1u) << what;
  EXPECT_EQ(a.sequences[0].tokens, b.sequences[0].tokens) << what;
  EXPECT_EQ(a.sequences[0].digest, b.sequences[0].digest) << what;
}

void check_model(devtools::TinyArch arch, const char* name) {
  const std::string dir = window_model(arch, name);
  const std::vector<std::int32_t> p = prompt(5, 2 * kWindow + 3);
  DeterministicSession off = DeterministicSession::open(dir, options(256, false, 1));
  const GenerationResult want = off.generate(p, sampled(1));
  ASSERT_EQ(want.sequences[0].tokens.size(), static_cast<std::size_t>(10 * kWindow));
  DeterministicSession cached = DeterministicSession::open(dir, options(3, true, 2));
  const GenerationResult cold = cached.generate(p, sampled(1));
  const GenerationResult warm = cached.generate(p, sampled(1));
  EXPECT_EQ(cold.cache.prefix_cached_tokens, 0);
  EXPECT_GT(warm.cache.prefix_cached_tokens, 0);
  expect_same(want, cold, std::string(name) + " cold, chunks of 3, 2 threads");
  expect_same(want, warm, std::string(name) + " warm");
  // Batched with other requests (different lengths): the same bits.
  std::vector<RequestHandle> hs;
  hs.push_back(cached.submit(prompt(6, 5), sampled(2)));
  hs.push_back(cached.submit(p, sampled(1)));
  hs.push_back(cached.submit(prompt(7, 31), sampled(3)));
  std::vector<GenerationResult> rs;
  for (RequestHandle& h : hs) rs.push_back(h.get());
  expect_same(want, rs[1], std::string(name) + " batched");
  expect_same(off.generate(prompt(7, 31), sampled(3)), rs[2], std::string(name) + " batched 2");
}

TEST(SlidingWindow, MistralGeneratesTenWindowsWithTheSameBits) {
  check_model(devtools::TinyArch::kMistral, "mistral");
}

TEST(SlidingWindow, Qwen2WithOneWindowedLayerGeneratesTheSameBits) {
  check_model(devtools::TinyArch::kQwen2, "qwen2");
}

TEST(SlidingWindow, Gemma2GeneratesTenWindowsWithTheSameBits) {
  check_model(devtools::TinyArch::kGemma2, "gemma2");
}

TEST(SlidingWindow, Gemma3GeneratesTenWindowsWithTheSameBits) {
  check_model(devtools::TinyArch::kGemma3, "gemma3");
}

// Bytes of one KV block of `tokens` tokens of the tiny model in `dir` (f32 K and V).
std::int64_t block_bytes(const std::string& dir, std::int64_t tokens) {
  std::ifstream in(dir + "/config.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  const std::int64_t head_dim =
      c.contains("head_dim") && c["head_dim"].is_number()
          ? c["head_dim"].get<std::int64_t>()
          : c["hidden_size"].get<std::int64_t>() / c["num_attention_heads"].get<std::int64_t>();
  return c["num_hidden_layers"].get<std::int64_t>() * 2 *
         c["num_key_value_heads"].get<std::int64_t>() * head_dim * 4 * tokens;
}

// Every layer slides (Mistral): the blocks no row can see are released as generation goes
// (engine_window.cpp), so a request's KV stays within the window. With blocks of 4 tokens
// a sequence holds at most 5 blocks (the window of 8 and a recompute chunk of 8), plus one
// for the fork headroom: a pool of 6 blocks generates 10 windows past a 19-token prompt
// (25 blocks without the release) with no preemption and the same bits.
TEST(SlidingWindow, MistralKvStaysWithinTheWindow) {
  const std::string dir = window_model(devtools::TinyArch::kMistral, "mistral-bounded");
  const std::vector<std::int32_t> p = prompt(5, 2 * kWindow + 3);
  DeterministicSession off = DeterministicSession::open(dir, options(256, false, 1));
  const GenerationResult want = off.generate(p, sampled(1));
  SessionOptions o = options(256, false, 1);
  o.kv_block_size = 4;
  o.kv_budget_bytes = 6 * block_bytes(dir, 4);
  DeterministicSession small = DeterministicSession::open(dir, o);
  ASSERT_EQ(small.stats().kv_blocks_capacity, 6);
  expect_same(want, small.generate(p, sampled(1)), "6 blocks");
  EXPECT_EQ(small.stats().preemptions, 0);
  EXPECT_EQ(small.stats().kv_blocks_in_use, 0);
}

// Fast mode (libtorch) reads only the window's keys too (Model::kv_horizon 8): the same
// pool of 6 blocks generates 10 windows with no preemption and the tokens of a fast-mode
// session whose pool never releases a block.
TEST(SlidingWindow, FastModeKvStaysWithinTheWindow) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "no libtorch";
  const std::string dir = window_model(devtools::TinyArch::kMistral, "mistral-fast-bounded");
  const std::vector<std::int32_t> p = prompt(5, 2 * kWindow + 3);
  SessionOptions o = options(256, false, 1);
  o.mode = NumericsMode::kFast;
  DeterministicSession big = DeterministicSession::open(dir, o);
  const GenerationResult want = big.generate(p, sampled(1));
  ASSERT_EQ(want.sequences[0].tokens.size(), static_cast<std::size_t>(10 * kWindow));
  o.kv_block_size = 4;
  o.kv_budget_bytes = 6 * block_bytes(dir, 4);
  DeterministicSession small = DeterministicSession::open(dir, o);
  ASSERT_EQ(small.stats().kv_blocks_capacity, 6);
  EXPECT_EQ(small.generate(p, sampled(1)).sequences[0].tokens, want.sequences[0].tokens);
  EXPECT_EQ(small.stats().preemptions, 0);
  EXPECT_EQ(small.stats().kv_blocks_in_use, 0);
}

// Ten windowed requests of 3-token prompts admitted at once (behind a blocker) on a pool
// of 16 blocks: each is admitted with 1 block and a block of headroom but decodes with up
// to 3, so the pool runs out and requests are preempted; resumed, they recompute (or, with
// the prefix cache, restore what their holed tables published) and every result equals
// its run alone.
TEST(SlidingWindow, PreemptedWindowedRequestsKeepTheBits) {
  const std::string dir = window_model(devtools::TinyArch::kMistral, "mistral-preempted");
  DeterministicSession off = DeterministicSession::open(dir, options(256, false, 1));
  for (const bool prefix : {false, true}) {
    SessionOptions o = options(256, prefix, 1);
    o.kv_block_size = 4;
    o.max_batch = 16;
    o.kv_budget_bytes = 16 * block_bytes(dir, 4);
    DeterministicSession s = DeterministicSession::open(dir, o);
    testing::Gate gate;
    GenerationConfig one;
    one.max_new_tokens = 1;
    RequestHandle blocker = s.submit(prompt(1, 2), one, gate.callback());
    gate.wait_entered();
    std::vector<RequestHandle> hs;
    try {  // a refused request must fail the test, not leave the engine held
      for (std::uint64_t i = 0; i < 10; ++i) hs.push_back(s.submit(prompt(20 + i, 3), sampled(i)));
    } catch (...) {
      gate.release();
      throw;
    }
    gate.release();
    blocker.get();
    const std::string what = prefix ? "prefix cache on" : "prefix cache off";
    for (std::uint64_t i = 0; i < 10; ++i) {
      expect_same(off.generate(prompt(20 + i, 3), sampled(i)), hs[i].get(),
                  what + ", request " + std::to_string(i));
    }
    EXPECT_GT(s.stats().preemptions, 0) << what;
    EXPECT_EQ(s.stats().resumptions, s.stats().preemptions) << what;
    EXPECT_EQ(s.stats().kv_blocks_in_use, 0) << what;
  }
}

}  // namespace
}  // namespace detinfer
