// Sliding-window models generate past their window (issue 29 item 5): a Mistral model with
// a window of 8, a Qwen2 model with one windowed layer and Gemma 2 / Gemma 3 models
// generate 10x the window with the same tokens and digests with the prefix cache off, cold
// and warm, prefilled in chunks of 3 or at once, on 1 or 2 threads, alone or batched with
// other requests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace detinfer
