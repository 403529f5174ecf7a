// Speculative decoding on the CUDA backend, emulated (docs/speculative.md, docs/cuda.md):
// the engine's verify passes run the model's CudaBackend over the kernels' own device code
// on CPU threads (emulated_cuda_ops.h). In canonical mode every output — tokens, digests,
// logprobs — with the n-gram drafter or a replaying drafter (partly corrupted drafts), alone
// or batched with a plain request, equals plain decoding on the CPU backend bit for bit.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "detinfer/philox.h"
#include "devtools/model_tools.h"
#include "engine/engine.h"
#include "model/cuda_backend.h"
#include "model/model.h"
#include "model/model_factories.h"
#include "model/model_test_util.h"
// After the model headers: defines the CUDA keywords and includes the kernels' device code.
#include "cuda/emulated_cuda_ops.h"

namespace detinfer::testing {
namespace {

using Drafter = decltype(engine::EngineRequest::drafter);

engine::EngineOptions small_engine() {
  engine::EngineOptions o;
  o.max_batch = 4;
  o.prefill_chunk_tokens = 9;
  o.kv_block_size = 4;
  o.kv_budget_bytes = 8 << 20;
  return o;
}

engine::EngineRequest make_request(const std::vector<std::int32_t>& prompt,
                                   const GenerationConfig& c) {
  engine::EngineRequest r;
  r.prompt = prompt;
  r.config = c;
  r.seed = c.seed.value_or(0);
  return r;
}

// The reference continuation of each sample, a token in `wrong_percent` replaced (Philox
// keyed by sample and position).
Drafter replay(const GenerationResult& ref, std::uint32_t wrong_percent, std::int32_t vocab) {
  return [ref, wrong_percent, vocab](std::int32_t sample, const std::vector<std::int32_t>& gen,
                                     std::int32_t max, std::vector<std::int32_t>& out) {
    const auto& t = ref.sequences.at(static_cast<std::size_t>(sample)).tokens;
    for (std::size_t p = gen.size(); p < t.size() && out.size() < std::size_t(max); ++p) {
      const bool wrong =
          philox_bits(11, static_cast<std::uint64_t>(sample), p, 0) % 100 < wrong_percent;
      out.push_back(wrong ? (t[p] + 1) % vocab : t[p]);
    }
  };
}

void expect_same(const GenerationResult& got, const GenerationResult& want,
                 const std::string& what) {
  ASSERT_EQ(got.sequences.size(), want.sequences.size()) << what;
  for (std::size_t i = 0; i < want.sequences.size(); ++i) {
    const Sequence& a = got.sequences[i];
    const Sequence& b = want.sequences[i];
    EXPECT_EQ(a.tokens, b.tokens) << what << ", sample " << i;
    EXPECT_EQ(a.digest, b.digest) << what << ", sample " << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
    for (std::size_t t = 0; t < a.logprobs.size(); ++t) {
      EXPECT_EQ(a.logprobs[t].logprob, b.logprobs[t].logprob) << what << ", step " << t;
      ASSERT_EQ(a.logprobs[t].top.size(), b.logprobs[t].top.size()) << what;
      for (std::size_t k = 0; k < a.logprobs[t].top.size(); ++k) {
        EXPECT_EQ(a.logprobs[t].top[k].token, b.logprobs[t].top[k].token) << what;
        EXPECT_EQ(a.logprobs[t].top[k].logprob, b.logprobs[t].top[k].logprob) << what;
      }
    }
  }
}

std::vector<GenerationConfig> configs() {
  GenerationConfig greedy;
  greedy.max_new_tokens = 14;
  greedy.ignore_eos = true;
  greedy.logprobs = 2;
  GenerationConfig seeded = greedy;
  seeded.temperature = 0.8f;
  seeded.top_k = 20;
  seeded.seed = 5;
  seeded.num_return_sequences = 2;
  return {greedy, seeded};
}

TEST(CudaSpeculativeEmulation, VerifyPassesOnTheEmulatedGpuGiveTheCpusPlainOutput) {
  const std::string dir = scratch_dir("cuda-spec-emu");
  devtools::TinyModelOptions to =
      tiny_options(devtools::TinyArch::kQwen2, core::DType::kBF16, dir, 7);
  to.vocab = 288;
  devtools::make_tiny_model(to);
  auto cpu = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
  model::ModelOptions mo;
  mo.device = parse_device("cuda:0");
  auto gpu =
      model::load_model_on(dir, mo,
                           model::make_cuda_backend_over(std::make_shared<EmulatedCudaOps>(),
                                                         NumericsMode::kCanonical, "cuda:0"));
  const auto vocab = static_cast<std::int32_t>(cpu->config().vocab_size);
  // A repeating prompt, so that the n-gram drafter finds matches.
  std::vector<std::int32_t> prompt = test_tokens(6, vocab, 3);
  for (int i = 0; i < 2; ++i) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 6);
  engine::Engine on_cpu(*cpu, nullptr, small_engine());
  engine::Engine on_gpu(*gpu, nullptr, small_engine());
  for (const GenerationConfig& plain : configs()) {
    const GenerationResult want = on_cpu.submit(make_request(prompt, plain)).get();
    expect_same(on_gpu.submit(make_request(prompt, plain)).get(), want, "plain on the GPU");
    GenerationConfig ngram = plain;
    ngram.draft_tokens = 3;
    expect_same(on_gpu.submit(make_request(prompt, ngram)).get(), want, "n-gram, 3");
    for (const std::uint32_t wrong : {0u, 40u}) {
      engine::EngineRequest r = make_request(prompt, plain);
      r.config.draft_tokens = 4;
      r.drafter = replay(want, wrong, vocab);
      expect_same(on_gpu.submit(r).get(), want, "replay, " + std::to_string(wrong) + "% wrong");
    }
    // A speculating request batched with a plain one.
    engine::EngineRequest spec = make_request(prompt, plain);
    spec.config.draft_tokens = 2;
    spec.drafter = replay(want, 20, vocab);
    const std::vector<std::int32_t> other = test_tokens(5, vocab, 9);
    const GenerationResult other_want = on_cpu.submit(make_request(other, plain)).get();
    auto a = on_gpu.submit(spec);
    auto b = on_gpu.submit(make_request(other, plain));
    expect_same(a.get(), want, "batched, speculating");
    expect_same(b.get(), other_want, "batched, plain");
  }
  const engine::EngineStats st = on_gpu.stats();
  EXPECT_GT(st.accepted_draft_tokens, 0);  // verification accepted drafts, not only rejected
  EXPECT_LT(st.accepted_draft_tokens, st.draft_tokens);  // and rejected some
}

}  // namespace
}  // namespace detinfer::testing
