// Real sliding-window attention for Mistral and Qwen2 (issue 29 item 5): with a window of 8
// over 40 positions the canonical logits match the float64 reference of transformers'
// masking (row t sees keys t - 8 < j <= t) within 1e-5 relative L2 and are far from full
// causal attention; bitwise invariant to chunking and threads; positions past the window
// are accepted (the window no longer caps the context). Fast mode (libtorch) masks the
// window too (within 1e-4 of the reference).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devtools/model_tools.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/reference_forward.h"

namespace detinfer::model {
namespace {

using nlohmann::json;

// The tiny model of `arch` with a window of 8 (Qwen2: layers >= max_window_layers 1) in a
// new scratch directory; its options.
devtools::TinyModelOptions windowed_model(devtools::TinyArch arch, const std::string& name) {
  const std::string dir = testing::scratch_dir("window-" + name);
  devtools::TinyModelOptions o = testing::tiny_options(arch, core::DType::kF32, dir, 9);
  o.sliding_window = 8;
  devtools::make_tiny_model(o);
  std::ifstream in(dir + "/config.json");
  json c = json::parse(in);
  if (arch == devtools::TinyArch::kQwen2) {
    c["max_window_layers"] = 1;
    std::ofstream(dir + "/config.json") << c.dump();
  }
  return o;
}

// The windowed model against the reference, and against a copy of it whose config has no
// window (the "window removed" reference).
void check_windowed(devtools::TinyArch arch, const std::string& name) {
  const devtools::TinyModelOptions o = windowed_model(arch, name);
  const std::string& dir = o.out_dir;
  const std::string full = testing::scratch_dir("window-" + name + "-full");
  devtools::make_tiny_model([&] {
    devtools::TinyModelOptions f = o;
    f.out_dir = full;
    f.sliding_window = 0;
    return f;
  }());
  const testing::ReferenceModel ref(dir);
  const auto tokens = testing::test_tokens(40, ref.vocab());
  const std::vector<float> got = testing::prefill_logits(dir, tokens, tokens.size());
  const double err = testing::worst_rel_l2(got, ref, tokens);
  const double no_window = testing::worst_rel_l2(got, testing::ReferenceModel(full), tokens);
  std::printf("  %s: reference %.3e, without the window %.3e\n", name.c_str(), err, no_window);
  ::testing::Test::RecordProperty("worst_rel_l2", std::to_string(err));
  ::testing::Test::RecordProperty("rel_l2_without_window", std::to_string(no_window));
  EXPECT_LE(err, 1e-5);
  EXPECT_GT(no_window, 1e-3);
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 1), got) << "token by token";
  EXPECT_EQ(testing::prefill_logits(dir, tokens, 7, 2), got) << "chunks of 7, 2 threads";
}

TEST(SlidingWindow, MistralMatchesTheReferenceMask) {
  check_windowed(devtools::TinyArch::kMistral, "mistral");
}

TEST(SlidingWindow, Qwen2WindowsLayersFromMaxWindowLayersOn) {
  check_windowed(devtools::TinyArch::kQwen2, "qwen2");
}

// Fast mode (libtorch) masks the window too: within 1e-4 of the reference over 40
// positions (32 past the window), in chunks of 9 and token by token.
TEST(SlidingWindow, FastModeMasksKeysOlderThanTheWindow) {
  if (!DETINFER_TEST_WITH_TORCH) GTEST_SKIP() << "no libtorch";
  for (const auto arch : {devtools::TinyArch::kMistral, devtools::TinyArch::kQwen2}) {
    const std::string name = std::string(devtools::tiny_arch_name(arch)) + "-fast";
    const std::string dir = windowed_model(arch, name).out_dir;
    const testing::ReferenceModel ref(dir);
    const auto tokens = testing::test_tokens(40, ref.vocab());
    for (const std::size_t chunk : {std::size_t{9}, std::size_t{1}}) {
      const double err = testing::worst_rel_l2(
          testing::prefill_logits(dir, tokens, chunk, 1, NumericsMode::kFast), ref, tokens);
      std::printf("  %s, chunks of %zu: reference %.3e\n", name.c_str(), chunk, err);
      ::testing::Test::RecordProperty(name + "_chunk" + std::to_string(chunk), std::to_string(err));
      EXPECT_LE(err, 1e-4) << name << ", chunks of " << chunk;
    }
  }
}

}  // namespace
}  // namespace detinfer::model
