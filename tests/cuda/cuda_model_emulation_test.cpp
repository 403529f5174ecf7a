// The whole CUDA forward pass, emulated: the model's CudaBackend (src/model/cuda_backend.cpp,
// the code a device=cuda session runs) over a CudaOps table that executes the CUDA kernels'
// own device code on CPU threads (emulated_cuda_ops.h). Canonical mode must give the CPU
// backend's logits bit for bit — tiny llama, qwen2 (biases, tied embeddings, one KV head)
// and qwen3 (q/k norms, head_dim != hidden/heads), f32 and bf16 weights, chunked prefill,
// batched prefill+decode and decode, in several batch compositions and KV block layouts.
// Device-invariant mode must give the same bits for a sequence whatever the batch
// composition and chunking, and stay close to the CPU. What this cannot show is listed in
// docs/cuda.md (hardware bits of the tensor cores, the real memory model).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/model_tools.h"
#include "model/cuda_backend.h"
#include "model/model.h"
#include "model/model_factories.h"
#include "model/model_test_util.h"
#include "model/prefill_logits.h"
#include "model/quant_scheme.h"
// After the model headers: defines the CUDA keywords and includes the kernels' device code.
#include "cuda/emulated_model_scenario.h"

namespace detinfer::testing {
namespace {

std::string tiny_model(devtools::TinyArch arch, core::DType dtype) {
  const std::string dir = scratch_dir("cuda-emu");
  devtools::TinyModelOptions o = tiny_options(arch, dtype, dir, 7);
  o.vocab = 288;
  devtools::make_tiny_model(o);
  return dir;
}

struct Case {
  devtools::TinyArch arch;
  core::DType dtype;
};

class CudaModelEmulation : public ::testing::TestWithParam<Case> {};

TEST_P(CudaModelEmulation, CanonicalForwardEqualsCpuBitForBit) {
  const std::string dir = tiny_model(GetParam().arch, GetParam().dtype);
  auto cpu = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
  auto gpu = emulated_cuda_model(dir, NumericsMode::kCanonical);
  EXPECT_EQ(gpu->fingerprint().hex(), cpu->fingerprint().hex());
  const Scenario sc = make_scenario(cpu->config().vocab_size);
  std::vector<std::vector<std::uint8_t>> cpu_kv, gpu_kv;
  const SeqLogits cpu_a = run_scenario(*cpu, sc.seqs, sc.a, 4, {0, 1}, &cpu_kv);
  EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}, &gpu_kv), cpu_a));
  // The KV blocks the prefix cache would store are the same bytes: CPU and canonical GPU
  // sessions can share them (one key namespace).
  ASSERT_EQ(gpu_kv.size(), cpu_kv.size());
  for (std::size_t i = 0; i < cpu_kv.size(); ++i) EXPECT_EQ(gpu_kv[i], cpu_kv[i]) << "block " << i;
  const SeqLogits gpu_b = run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0});
  EXPECT_TRUE(same_bits(gpu_b, run_scenario(*cpu, sc.seqs, sc.b, 16, {1, 0})));
  // And so the emulated GPU is invariant to the composition, like the CPU.
  EXPECT_TRUE(
      same_bits(generation_rows(gpu_b, sc.seqs, false), generation_rows(cpu_a, sc.seqs, false)));
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* const kDtype[] = {"f32", "bf16", "f16"};
  return std::string(devtools::tiny_arch_name(info.param.arch)) + "_" +
         kDtype[static_cast<int>(info.param.dtype)];
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CudaModelEmulation,
                         ::testing::Values(Case{devtools::TinyArch::kLlama, core::DType::kF32},
                                           Case{devtools::TinyArch::kLlama, core::DType::kBF16},
                                           Case{devtools::TinyArch::kQwen2, core::DType::kF32},
                                           Case{devtools::TinyArch::kQwen2, core::DType::kBF16},
                                           Case{devtools::TinyArch::kQwen3, core::DType::kF32},
                                           Case{devtools::TinyArch::kQwen3, core::DType::kBF16},
                                           Case{devtools::TinyArch::kOlmo2, core::DType::kBF16},
                                           Case{devtools::TinyArch::kPhi3, core::DType::kBF16},
                                           // Mixture of experts: routing on the host, experts
                                           // on the backend's linear kernels.
                                           Case{devtools::TinyArch::kQwen3Moe, core::DType::kBF16},
                                           Case{devtools::TinyArch::kMixtral, core::DType::kF32},
                                           Case{devtools::TinyArch::kQwen2Moe, core::DType::kBF16}),
                         case_name);

// Sliding windows (issue 29) on the canonical CUDA kernel: a Mistral model with a window
// of 5 (every layer) and a Qwen2 model whose layer 1 slides, over sequences of up to 15
// tokens, give the CPU's bits in both compositions; device-invariant mode (the split
// kernel, clipped to the window) gives a sequence the same bits in both.
TEST(CudaModelEmulationWindow, CanonicalWindowedAttentionEqualsCpuBitForBit) {
  for (const devtools::TinyArch arch : {devtools::TinyArch::kMistral, devtools::TinyArch::kQwen2}) {
    const std::string dir = scratch_dir("cuda-emu-window");
    devtools::TinyModelOptions o = tiny_options(arch, core::DType::kBF16, dir, 7);
    o.vocab = 288;
    o.sliding_window = 5;
    devtools::make_tiny_model(o);
    if (arch == devtools::TinyArch::kQwen2) {
      std::ifstream in(dir + "/config.json");
      nlohmann::json c = nlohmann::json::parse(in);
      c["max_window_layers"] = 1;
      std::ofstream(dir + "/config.json") << c.dump();
    }
    auto cpu = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
    ASSERT_EQ(cpu->config().sliding_window, 5);
    auto gpu = emulated_cuda_model(dir, NumericsMode::kCanonical);
    const Scenario sc = make_scenario(cpu->config().vocab_size);
    const SeqLogits cpu_a = run_scenario(*cpu, sc.seqs, sc.a, 4, {0, 1});
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}), cpu_a));
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0}),
                          run_scenario(*cpu, sc.seqs, sc.b, 16, {1, 0})));
    auto inv = emulated_cuda_model(dir, NumericsMode::kDeviceInvariant);
    EXPECT_TRUE(
        same_bits(generation_rows(run_scenario(*inv, sc.seqs, sc.a, 4, {0, 1}), sc.seqs, false),
                  generation_rows(run_scenario(*inv, sc.seqs, sc.b, 16, {1, 0}), sc.seqs, false)));
  }
}

// The engine's released blocks (docs/session.md, "Sliding windows and the KV cache") on the
// canonical CUDA kernel: with every block before the window -1 in the table, 24 positions
// of a window-5 Mistral fed token by token and in chunks of 5 give the CPU's bits.
TEST(CudaModelEmulationWindow, ReleasedBlocksBeforeTheWindowKeepTheCpuBits) {
  const std::string dir = scratch_dir("cuda-emu-window-holes");
  devtools::TinyModelOptions o =
      tiny_options(devtools::TinyArch::kMistral, core::DType::kBF16, dir, 7);
  o.vocab = 288;
  o.sliding_window = 5;
  devtools::make_tiny_model(o);
  auto cpu = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
  auto gpu = emulated_cuda_model(dir, NumericsMode::kCanonical);
  ASSERT_EQ(gpu->kv_horizon(), 5);
  const auto tokens = test_tokens(24, cpu->config().vocab_size);
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{5}}) {
    std::int64_t released = 0;
    const std::vector<float> want = logits_with_holes(*cpu, tokens, chunk, false, &released);
    EXPECT_EQ(logits_with_holes(*gpu, tokens, chunk, true, &released), want) << chunk;
    EXPECT_GE(released, 3);
  }
}

// Gemma 2 (soft-caps, even layers windowed) and Gemma 3 (q/k norms, local RoPE table) on
// the emulated canonical CUDA backend: the CPU's bits in both compositions (device-invariant
// mode: cuda_invariant_gemma_emulation_test.cpp).
TEST(CudaModelEmulationWindow, GemmaCanonicalEqualsCpuBitForBit) {
  for (const devtools::TinyArch arch : {devtools::TinyArch::kGemma2, devtools::TinyArch::kGemma3}) {
    const std::string dir = scratch_dir("cuda-emu-gemma");
    devtools::TinyModelOptions o = tiny_options(arch, core::DType::kBF16, dir, 7);
    o.vocab = 288;
    o.layers = 3;
    o.hidden = 48;
    o.head_dim = 16;
    o.sliding_window = 5;
    o.sliding_window_pattern = 2;
    o.attn_logit_softcapping = arch == devtools::TinyArch::kGemma2 ? 3.0 : 0.0;
    o.final_logit_softcapping = arch == devtools::TinyArch::kGemma2 ? 4.0 : 0.0;
    o.rope_local_base_freq = 100.0;
    o.linear_rope_factor = arch == devtools::TinyArch::kGemma3 ? 2.0 : 1.0;
    devtools::make_tiny_model(o);
    auto cpu = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
    auto gpu = emulated_cuda_model(dir, NumericsMode::kCanonical);
    const Scenario sc = make_scenario(cpu->config().vocab_size);
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}),
                          run_scenario(*cpu, sc.seqs, sc.a, 4, {0, 1})))
        << static_cast<int>(arch);
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0}),
                          run_scenario(*cpu, sc.seqs, sc.b, 16, {1, 0})))
        << static_cast<int>(arch);
  }
}

TEST(CudaModelEmulationInvariant, DeviceInvariantIgnoresCompositionAndStaysCloseToCpu) {
  for (const devtools::TinyArch arch : {devtools::TinyArch::kQwen2, devtools::TinyArch::kQwen3}) {
    const std::string dir = tiny_model(arch, core::DType::kBF16);
    auto cpu = model::Model::load(dir, {NumericsMode::kCanonical, 1, {}});
    auto gpu = emulated_cuda_model(dir, NumericsMode::kDeviceInvariant);
    const Scenario sc = make_scenario(cpu->config().vocab_size);
    const SeqLogits a =
        generation_rows(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}), sc.seqs, false);
    const SeqLogits b =
        generation_rows(run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0}), sc.seqs, false);
    EXPECT_TRUE(same_bits(a, b)) << "arch " << static_cast<int>(arch);
    const SeqLogits want =
        generation_rows(run_scenario(*cpu, sc.seqs, sc.a, 4, {0, 1}), sc.seqs, false);
    // bf16 activations into the linear layers: close to the CPU, not equal.
    double worst = 0;
    for (std::size_t s = 0; s < a.size(); ++s)
      for (std::size_t r = 0; r < a[s].size(); ++r)
        for (std::size_t i = 0; i < a[s][r].size(); ++i)
          worst = std::max(worst, std::abs(static_cast<double>(a[s][r][i]) - want[s][r][i]) /
                                      (1.0 + std::abs(static_cast<double>(want[s][r][i]))));
    EXPECT_LT(worst, 0.1) << "arch " << static_cast<int>(arch);
    EXPECT_GT(worst, 0.0) << "device-invariant mode should not be running the canonical kernels";
  }
}

// Mixture of experts in device-invariant mode: the tensor-core linears give a row the same
// bits for any row count, so the experts' gathered rows (and so routing) do not depend on
// the composition either. (Not compared with the CPU: bf16 activations may flip a route.)
TEST(CudaModelEmulationInvariant, DeviceInvariantMoeIgnoresComposition) {
  for (const devtools::TinyArch arch : {devtools::TinyArch::kQwen3Moe}) {  // (emulation is slow)
    const std::string dir = tiny_model(arch, core::DType::kBF16);
    auto gpu = emulated_cuda_model(dir, NumericsMode::kDeviceInvariant);
    const Scenario sc = make_scenario(gpu->config().vocab_size);
    const SeqLogits a =
        generation_rows(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}), sc.seqs, false);
    const SeqLogits b =
        generation_rows(run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0}), sc.seqs, false);
    EXPECT_TRUE(same_bits(a, b)) << "arch " << static_cast<int>(arch);
  }
}

// 16-bit KV storage on CUDA: the kv_write kernel rounds K and V as the CPU backend does,
// so canonical logits and the exported KV blocks equal the CPU's bit for bit for each
// kv_dtype, and differ from f32 KV (the rounding really happens).
TEST(CudaModelEmulationKvDtype, HalfKvEqualsCpuBitForBit) {
  const std::string dir = tiny_model(devtools::TinyArch::kQwen2, core::DType::kBF16);
  SeqLogits f32_rows;
  for (const core::DType kv : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    model::ModelOptions cpu_o{NumericsMode::kCanonical, 1, {}};
    cpu_o.kv_dtype = kv;
    auto cpu = model::Model::load(dir, cpu_o);
    model::ModelOptions mo;
    mo.device = parse_device("cuda:0");
    mo.kv_dtype = kv;
    auto gpu =
        model::load_model_on(dir, mo,
                             model::make_cuda_backend_over(std::make_shared<EmulatedCudaOps>(),
                                                           NumericsMode::kCanonical, "cuda:0"));
    const Scenario sc = make_scenario(cpu->config().vocab_size);
    std::vector<std::vector<std::uint8_t>> cpu_kv, gpu_kv;
    const SeqLogits want = run_scenario(*cpu, sc.seqs, sc.a, 4, {0, 1}, &cpu_kv);
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}, &gpu_kv), want))
        << core::to_string(kv);
    ASSERT_EQ(gpu_kv.size(), cpu_kv.size());
    for (std::size_t i = 0; i < cpu_kv.size(); ++i) EXPECT_EQ(gpu_kv[i], cpu_kv[i]) << i;
    if (kv == core::DType::kF32) {
      f32_rows = want;
    } else {
      EXPECT_FALSE(same_bits(want, f32_rows)) << core::to_string(kv) << " KV was not rounded";
    }
  }
}

// Scenario a (4-token chunks, sequences in order) on both models: the same logits, bit
// for bit.
void expect_scenario_a_bits(model::Model& gpu, model::Model& cpu) {
  const Scenario sc = make_scenario(cpu.config().vocab_size);
  EXPECT_TRUE(same_bits(run_scenario(gpu, sc.seqs, sc.a, 4, {0, 1}),
                        run_scenario(cpu, sc.seqs, sc.a, 4, {0, 1})));
}

// Quantized linears on the canonical CUDA kernels (kernels::cuda::quant_linear): GGUF files
// of quantized tensors give the CPU backend's logits (and KV bytes) bit for bit — qwen2
// Q8_0 (biases, a tied quantized embedding read back by quant_embedding) and phi3 Q4_1
// (untied, fused projections, a min term) — in two batch compositions and block layouts.
TEST(CudaModelEmulationQuantized, GgufQuantizedTensorsEqualCpuBitForBit) {
  struct QuantCase {
    devtools::TinyArch arch;
    kernels::QuantFormat format;
  };
  for (const QuantCase c : {QuantCase{devtools::TinyArch::kQwen2, kernels::QuantFormat::kQ8_0},
                            QuantCase{devtools::TinyArch::kPhi3, kernels::QuantFormat::kQ4_1}}) {
    const std::string dir = tiny_model(c.arch, core::DType::kBF16);
    devtools::GgufConvertOptions g;
    g.quantize = c.format;
    const std::string file = devtools::write_gguf_model(dir, dir + "/q.gguf", g).front();
    auto cpu = model::Model::load(file, {NumericsMode::kCanonical, 1, {}});
    auto gpu = emulated_cuda_model(file, NumericsMode::kCanonical);
    EXPECT_EQ(gpu->fingerprint().hex(), cpu->fingerprint().hex());
    const Scenario sc = make_scenario(cpu->config().vocab_size);
    std::vector<std::vector<std::uint8_t>> cpu_kv, gpu_kv;
    const SeqLogits want = run_scenario(*cpu, sc.seqs, sc.a, 4, {0, 1}, &cpu_kv);
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.a, 4, {0, 1}, &gpu_kv), want))
        << kernels::to_string(c.format);
    EXPECT_EQ(gpu_kv, cpu_kv) << kernels::to_string(c.format);
    EXPECT_TRUE(same_bits(run_scenario(*gpu, sc.seqs, sc.b, 16, {1, 0}),
                          run_scenario(*cpu, sc.seqs, sc.b, 16, {1, 0})))
        << kernels::to_string(c.format);
  }
}

// The K formats need rows of whole 256-weight super-blocks: a qwen2 model 256 wide (tied)
// in llama.cpp's q4_k_m mix (q4_K and q6_K tensors) gives the CPU's bits.
TEST(CudaModelEmulationQuantized, GgufKQuantMixEqualsCpuBitForBit) {
  const std::string dir = scratch_dir("cuda-emu-k");
  devtools::TinyModelOptions o =
      tiny_options(devtools::TinyArch::kQwen2, core::DType::kBF16, dir, 7);
  o.vocab = 288;
  o.hidden = 256;
  o.intermediate = 512;
  devtools::make_tiny_model(o);
  devtools::GgufConvertOptions g;
  model::QuantScheme scheme;
  ASSERT_TRUE(model::parse_quant_scheme("q4_k_m", &scheme));
  g.quantize = scheme;
  const std::string file = devtools::write_gguf_model(dir, dir + "/q.gguf", g).front();
  auto cpu = model::Model::load(file, {NumericsMode::kCanonical, 1, {}});
  auto gpu = emulated_cuda_model(file, NumericsMode::kCanonical);
  expect_scenario_a_bits(*gpu, *cpu);
}

// ModelOptions::weights (quantizing on load) on the emulated CUDA backend: the CPU's bits.
TEST(CudaModelEmulationQuantized, WeightsQuantizedOnLoadEqualCpuBitForBit) {
  const std::string dir = tiny_model(devtools::TinyArch::kQwen3, core::DType::kF32);
  model::ModelOptions mo;
  mo.weights = model::QuantScheme(kernels::QuantFormat::kQ5_1);
  auto cpu = model::Model::load(dir, mo);
  mo.device = parse_device("cuda:0");
  auto gpu =
      model::load_model_on(dir, mo,
                           model::make_cuda_backend_over(std::make_shared<EmulatedCudaOps>(),
                                                         NumericsMode::kCanonical, "cuda:0"));
  EXPECT_EQ(gpu->fingerprint().hex(), cpu->fingerprint().hex());
  expect_scenario_a_bits(*gpu, *cpu);
}

// Outside canonical mode the CUDA backend has no quantized kernels: a GGUF file with Q8_0
// tensors is refused with kUnsupported naming the type, and quantizing on load with
// kUnsupported naming the mode; never loaded some other way.
TEST(CudaModelEmulationQuantized, DeviceInvariantModeRefusesQuantizedTensors) {
  const std::string dir = tiny_model(devtools::TinyArch::kQwen2, core::DType::kBF16);
  devtools::GgufConvertOptions g;
  g.quantize = kernels::QuantFormat::kQ8_0;
  const std::string file = devtools::write_gguf_model(dir, dir + "/q8.gguf", g).front();
  try {
    emulated_cuda_model(file, NumericsMode::kDeviceInvariant);
    ADD_FAILURE() << "the device-invariant CUDA backend took Q8_0 tensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
  }
  model::ModelOptions mo;
  mo.mode = NumericsMode::kDeviceInvariant;
  mo.device = parse_device("cuda:0");
  mo.weights = model::QuantScheme(kernels::QuantFormat::kQ8_0);
  try {
    model::load_model_on(
        dir, mo,
        model::make_cuda_backend_over(std::make_shared<EmulatedCudaOps>(), mo.mode, "cuda:0"));
    ADD_FAILURE() << "the device-invariant CUDA backend quantized on load";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(to_string(mo.mode)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace detinfer::testing
