// Device-invariant (and fast) mode on the emulated CUDA backend runs Gemma 2, Gemma 3 and
// sliding windows far past the window (issue 29): the split attention kernel clips its
// fixed splits to the window and soft-caps the scores like the canonical kernel.
//
// - Tiny Gemma 2 (soft-caps, even layers windowed) and Gemma 3 (local RoPE table, q/k
//   norms) models, 48 positions with a window of 8: within kGemmaTolerance (worst relative
//   L2) of the float64 reference (reference_gemma.h), and much farther from the reference
//   without the window (and, Gemma 2, without the attention soft-cap); the same bits
//   token by token, in chunks and in one chunk, in fast mode (the same kernels), and in
//   two batch compositions.
// - A Mistral model with a window of 5 over 40 positions (8 windows) and over 300
//   positions (past the first 256-key split, so whole splits are skipped): close to the
//   float64 reference, far from it without the window, and the same bits with the
//   engine's released blocks (-1 table entries before the window) in chunks.
//
// Tolerances: non-canonical CUDA modes round the linears' weights and activations to bf16
// (relative 2^-9 each, tensor cores accumulate in f32), so the logits are close to the
// float64 pass, not equal; the canonical CPU path is within 1e-5 of the same references
// (gemma_test.cpp, sliding_window_test.cpp). The existing device-invariant test
// (cuda_model_emulation_test.cpp) accepts 0.1 element-wise; here the measured worst
// relative L2 (printed and recorded as test properties) is held to a tighter bound, with
// the ablated references more than 5x the tolerance away.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "devtools/model_tools.h"
#include "model/gemma_tiny.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/reference_gemma.h"
// After the model headers: defines the CUDA keywords and includes the kernels' device code.
#include "cuda/emulated_model_scenario.h"

namespace detinfer::testing {
namespace {

using Ablation = ReferenceGemma::Ablation;

// Measured (emulator): Gemma 2 4.1e-3, Gemma 3 4.0e-3, Mistral 7.4e-3; without the window
// 0.39 / 0.48 / 1.2, Gemma 2 without the attention soft-cap 0.19.
constexpr double kGemmaTolerance = 1e-2;
constexpr double kWindowTolerance = 1.5e-2;

// The worst relative L2 of `got` from a reference; printed and recorded.
template <class Reference>
double distance(const std::vector<float>& got, const Reference& ref,
                const std::vector<std::int32_t>& tokens, const std::string& what) {
  const double d = worst_rel_l2(got, ref, tokens);
  std::printf("  %-36s worst rel L2 %.3e\n", what.c_str(), d);
  ::testing::Test::RecordProperty(what, std::to_string(d));
  return d;
}

void check_gemma(devtools::TinyArch arch, const std::string& name) {
  const std::string dir = scratch_dir("cuda-inv-" + name);
  devtools::TinyModelOptions o = gemma_reference_options(arch, dir);
  o.vocab = 288;  // (emulation time goes mostly to the lm_head)
  devtools::make_tiny_model(o);
  const ReferenceGemma ref(dir);
  auto gpu = emulated_cuda_model(dir, NumericsMode::kDeviceInvariant);
  const auto tokens = test_tokens(48, ref.vocab());
  std::int64_t released = 0;
  const std::vector<float> got = logits_with_holes(*gpu, tokens, tokens.size(), false, &released);
  const double err = distance(got, ref, tokens, name + "_reference");
  EXPECT_LE(err, kGemmaTolerance);
  EXPECT_GT(err, 0.0) << "device-invariant mode should not be running the canonical kernels";
  EXPECT_GT(distance(got, ReferenceGemma(dir, Ablation::kNoWindow), tokens, name + "_no_window"),
            5 * kGemmaTolerance);
  if (arch == devtools::TinyArch::kGemma2) {
    EXPECT_GT(distance(got, ReferenceGemma(dir, Ablation::kNoAttnSoftcap), tokens,
                       name + "_no_attn_softcap"),
              5 * kGemmaTolerance);
  }
  EXPECT_EQ(logits_with_holes(*gpu, tokens, 1, false, &released), got) << "token by token";
  EXPECT_EQ(logits_with_holes(*gpu, tokens, 7, false, &released), got) << "chunks of 7";
  auto fast = emulated_cuda_model(dir, NumericsMode::kFast);
  EXPECT_EQ(logits_with_holes(*fast, tokens, 16, false, &released), got) << "fast mode";
  EXPECT_EQ(released, 0);  // a global layer sees every key: nothing is released
  const Scenario sc = make_scenario(ref.vocab());
  EXPECT_TRUE(
      same_bits(generation_rows(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}), sc.seqs, false),
                generation_rows(run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0}), sc.seqs, false)));
}

TEST(CudaInvariantGemma, Gemma2MatchesTheReferenceAndIgnoresBatchingAndChunking) {
  check_gemma(devtools::TinyArch::kGemma2, "gemma2");
}

TEST(CudaInvariantGemma, Gemma3MatchesTheReferenceAndIgnoresBatchingAndChunking) {
  check_gemma(devtools::TinyArch::kGemma3, "gemma3");
}

// A Mistral model with a window of 5 and the same model without one (the "window
// removed" reference).
struct Windowed {
  std::string dir, full;
};

Windowed mistral(const std::string& name) {
  Windowed w{scratch_dir("cuda-inv-" + name), scratch_dir("cuda-inv-" + name + "-full")};
  devtools::TinyModelOptions o =
      tiny_options(devtools::TinyArch::kMistral, core::DType::kBF16, w.dir, 7);
  o.vocab = 288;
  o.sliding_window = 5;
  devtools::make_tiny_model(o);
  o.out_dir = w.full;
  o.sliding_window = 0;
  devtools::make_tiny_model(o);
  return w;
}

// `positions` tokens in one chunk (no holes) against the references, then in each of
// `chunks` with the released blocks before the window as -1 entries: the same bits.
void check_mistral(const std::string& name, std::size_t positions,
                   const std::vector<std::size_t>& chunks) {
  const Windowed w = mistral(name);
  auto gpu = emulated_cuda_model(w.dir, NumericsMode::kDeviceInvariant);
  ASSERT_EQ(gpu->kv_horizon(), 5);
  const auto tokens = test_tokens(positions, gpu->config().vocab_size);
  std::int64_t released = 0;
  const std::vector<float> got = logits_with_holes(*gpu, tokens, positions, false, &released);
  const double err = distance(got, ReferenceModel(w.dir), tokens, name + "_reference");
  EXPECT_LE(err, kWindowTolerance);
  EXPECT_GT(err, 0.0);
  EXPECT_GT(distance(got, ReferenceModel(w.full), tokens, name + "_no_window"),
            5 * kWindowTolerance);
  for (const std::size_t chunk : chunks) {
    released = 0;
    EXPECT_EQ(logits_with_holes(*gpu, tokens, chunk, true, &released), got) << "chunk " << chunk;
    EXPECT_GE(released, static_cast<std::int64_t>(positions / 8)) << "chunk " << chunk;
  }
}

TEST(CudaInvariantWindow, MistralEightWindowsPastWithReleasedBlocks) {
  check_mistral("mistral40", 40, {1, 6});
}

TEST(CudaInvariantWindow, MistralPastTheFirstSplitWithReleasedBlocks) {
  check_mistral("mistral300", 300, {64});
}

}  // namespace
}  // namespace detinfer::testing
