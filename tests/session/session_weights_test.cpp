// SessionOptions::weights (docs/numerics.md, "Quantized linear"): with q8_0 weights the
// canonical outputs are invariant to batch composition, prefill chunking, threads, ISA and
// prefix-cache hits; they differ from the native weights' and are keyed apart from them
// (fingerprint, prefix cache); a golden digest pins quantized spec v1; bad values and
// unsupported modes are clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "kernels/kernels.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::expect_identical;
using testing::test_tmp_path;
using testing::tiny_model_dir;
using testing::tiny_options;

SessionOptions q8_options(std::int32_t threads = 1, const std::string& weights = "q8_0") {
  SessionOptions o = tiny_options(threads);
  o.weights = weights;
  o.cache.prefix.enabled = false;
  return o;
}

GenerationConfig greedy(int n = 12) {
  GenerationConfig c;
  c.max_new_tokens = n;
  c.ignore_eos = true;
  c.logprobs = 3;
  return c;
}

GenerationConfig sampled() {
  GenerationConfig c = greedy();
  c.temperature = 0.9f;
  c.seed = 11;
  return c;
}

TEST(QuantizedWeights, InvariantToChunkingThreadsIsaAndCacheHits) {
  DeterministicSession base = DeterministicSession::open(tiny_model_dir(), q8_options());
  const std::vector<std::int32_t> prompt = testing::chunk_crossing_prompt(base);
  const GenerationResult want_g = base.generate(prompt, greedy());
  const GenerationResult want_s = base.generate(prompt, sampled());
  base.close();
  for (std::int32_t chunk : {1, 7, 64, 256}) {
    SessionOptions o = q8_options();
    o.prefill_chunk_tokens = chunk;
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), o);
    expect_identical(want_g, s.generate(prompt, greedy()), "chunk " + std::to_string(chunk));
  }
  for (std::int32_t threads : {1, 2}) {
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), q8_options(threads));
    expect_identical(want_s, s.generate(prompt, sampled()), "threads " + std::to_string(threads));
  }
  const kernels::Isa saved = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (!kernels::isa_supported(isa)) continue;  // the CPU lacks it: nothing to compare
    kernels::set_isa(isa);
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), q8_options(2));
    expect_identical(want_g, s.generate(prompt, greedy()), kernels::to_string(isa));
  }
  kernels::set_isa(saved);
  SessionOptions cached = q8_options();
  cached.cache.prefix.enabled = true;
  DeterministicSession s = DeterministicSession::open(tiny_model_dir(), cached);
  const GenerationResult cold = s.generate(prompt, greedy());
  const GenerationResult warm = s.generate(prompt, greedy());
  EXPECT_EQ(cold.cache.prefix_cached_tokens, 0);
  EXPECT_GT(warm.cache.prefix_cached_tokens, 0);
  expect_identical(want_g, cold, "cache cold");
  expect_identical(want_g, warm, "cache warm");
}

// 1, 4 and 16 concurrent requests (different prompts as batch mates): each request's
// result is the one it gets alone.
TEST(QuantizedWeights, InvariantToBatchComposition) {
  for (std::int32_t threads : {1, 2}) {
    DeterministicSession s = DeterministicSession::open(tiny_model_dir(), q8_options(threads));
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<GenerationResult> alone;
    for (std::uint64_t i = 0; i < 16; ++i) {
      prompts.push_back(testing::chunk_crossing_prompt(s, 10 + i));
      prompts.back().resize(20 + 3 * i);
      alone.push_back(s.generate(prompts.back(), i % 2 == 0 ? greedy() : sampled()));
    }
    for (std::size_t batch : {4u, 16u}) {
      std::vector<RequestHandle> h;
      for (std::size_t i = 0; i < batch; ++i)
        h.push_back(s.submit(prompts[i], i % 2 == 0 ? greedy() : sampled()));
      for (std::size_t i = 0; i < batch; ++i)
        expect_identical(alone[i], h[i].get(),
                         "batch " + std::to_string(batch) + " request " + std::to_string(i));
    }
  }
}

// q8_0 computes other numbers than the stored f32 weights, is recorded in the fingerprint,
// and a prefix cache shared through a disk tier never serves one format's KV to the other.
TEST(QuantizedWeights, DiffersFromNativeAndIsKeyedApart) {
  const std::string dir = test_tmp_path("weights-disk-", std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto open = [&](const std::string& weights) {
    SessionOptions o = q8_options(1, weights);
    o.cache.prefix.enabled = true;
    o.cache.prefix.memory.enabled = false;
    o.cache.prefix.disk.directory = dir;
    return DeterministicSession::open(tiny_model_dir(), o);
  };
  std::vector<std::int32_t> prompt;
  GenerationResult native;
  {
    DeterministicSession s = open("native");
    prompt = testing::chunk_crossing_prompt(s);
    native = s.generate(prompt, greedy());
    EXPECT_EQ(native.fingerprint_json.find("weight_format"), std::string::npos);
  }
  {
    DeterministicSession s = open("q8_0");
    const GenerationResult q = s.generate(prompt, greedy());
    EXPECT_EQ(q.cache.prefix_cached_tokens, 0) << "q8_0 was served native KV blocks";
    EXPECT_NE(q.sequences[0].step_digests, native.sequences[0].step_digests);
    EXPECT_NE(q.fingerprint_json.find("\"weight_format\":\"q8_0/qspec1\""), std::string::npos)
        << q.fingerprint_json;
    // Close to native: the greedy top-1 of the first step agrees.
    EXPECT_EQ(q.sequences[0].tokens[0], native.sequences[0].tokens[0]);
  }
  {
    DeterministicSession s = open("q8_0");  // within q8_0 the disk tier does share
    const GenerationResult again = s.generate(prompt, greedy());
    EXPECT_GT(again.cache.prefix_cached_tokens, 0);
  }
  std::filesystem::remove_all(dir);
}

// Quantized spec v1 pinned: the chain digest of a greedy run of a generated tiny model with
// tied embeddings (so the embedding rows are the quantized lm_head's, dequantized). The
// generator and every step of the quantized path are machine-independent; a change here
// is a spec change (a new kQuantSpecVersion).
TEST(QuantizedWeights, GoldenDigestOfATinyTiedQ8Model) {
  const std::string dir = test_tmp_path("weights-golden-", std::to_string(::getpid()));
  devtools::TinyModelOptions m;
  m.out_dir = dir;
  m.seed = 21;
  m.vocab = 200;  // no tokenizer: the digest does not depend on the tiny tokenizer
  m.tie_word_embeddings = true;
  devtools::make_tiny_model(m);
  const std::vector<std::int32_t> prompt = {5, 17, 42, 99, 3, 150, 7, 64};
  constexpr std::uint64_t kGolden = 0x2b05d3d5ae33520dULL;
  const kernels::Isa saved = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (!kernels::isa_supported(isa)) continue;  // the CPU lacks it: nothing to compare
    kernels::set_isa(isa);
    for (std::int32_t threads : {1, 2}) {
      DeterministicSession s = DeterministicSession::open(dir, q8_options(threads));
      const std::uint64_t got = s.generate(prompt, greedy(16)).sequences[0].digest;
      EXPECT_EQ(got, kGolden) << kernels::to_string(isa) << " threads " << threads << ": "
                              << std::hex << got;
    }
  }
  kernels::set_isa(saved);
  DeterministicSession n = DeterministicSession::open(dir, q8_options(1, "native"));
  EXPECT_NE(n.generate(prompt, greedy(16)).sequences[0].digest, kGolden);
  std::filesystem::remove_all(dir);
}

// q4_0 and q5_0 (decoded exactly to the same int8 panels): invariant to threads, ISA and
// prefill chunking, other bits than q8_0, recorded in the fingerprint.
TEST(QuantizedWeights, Q4AndQ5AreInvariantAndDistinct) {
  DeterministicSession q8 = DeterministicSession::open(tiny_model_dir(), q8_options());
  const std::vector<std::int32_t> prompt = testing::chunk_crossing_prompt(q8);
  const GenerationResult r8 = q8.generate(prompt, greedy());
  for (const std::string fmt : {"q4_0", "q5_0"}) {
    DeterministicSession base = DeterministicSession::open(tiny_model_dir(), q8_options(1, fmt));
    const GenerationResult want = base.generate(prompt, sampled());
    EXPECT_NE(want.fingerprint_json.find("\"weight_format\":\"" + fmt + "/qspec1\""),
              std::string::npos);
    EXPECT_NE(base.generate(prompt, greedy()).sequences[0].step_digests,
              r8.sequences[0].step_digests)
        << fmt;
    const kernels::Isa saved = kernels::active_isa();
    for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
      if (!kernels::isa_supported(isa)) continue;  // the CPU lacks it: nothing to compare
      kernels::set_isa(isa);
      SessionOptions o = q8_options(2, fmt);
      o.prefill_chunk_tokens = 7;
      DeterministicSession s = DeterministicSession::open(tiny_model_dir(), o);
      expect_identical(want, s.generate(prompt, sampled()), fmt + " " + kernels::to_string(isa));
    }
    kernels::set_isa(saved);
  }
}

TEST(QuantizedWeights, BadValuesAndUnsupportedModesAreClearErrors) {
  testing::expect_open_error(tiny_model_dir(), q8_options(1, "q9_0"), ErrorCode::kInvalidArgument,
                             "weights", "weights q9_0");
  SessionOptions fast = q8_options();
  fast.mode = NumericsMode::kFast;
  testing::expect_open_error(tiny_model_dir(), fast, ErrorCode::kUnsupported, "weights",
                             "fast mode with q8_0 weights");
}

}  // namespace
}  // namespace detinfer
