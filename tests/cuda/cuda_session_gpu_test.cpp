// End-to-end GPU sessions (label gpu; part of cuda_gpu_tests): device=cuda through the
// public API. Canonical: the same tokens, chain digest and per-step digests as the CPU
// session for the same requests, prefix-cache hits included. Device-invariant: one
// request's output is the same alone, batched with others, prefilled in small chunks and
// served from the prefix cache. Quantized weights (canonical): the CPU's tokens. Without a
// device every test is skipped, saying why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "detinfer/fingerprint.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"
#include "kernels/cuda/cuda_kernels.h"

namespace detinfer {
namespace {

std::string model_dir(devtools::TinyArch arch, core::DType dtype) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/cuda-session-" +
                          std::to_string(static_cast<int>(arch)) + "-" +
                          std::to_string(static_cast<int>(dtype)) + "-" +
                          std::to_string(static_cast<long>(getpid()));
  devtools::TinyModelOptions o;
  o.arch = arch;
  o.dtype = dtype;
  o.seed = 11;
  o.out_dir = dir;
  if (arch == devtools::TinyArch::kQwen3) o.head_dim = 32;
  if (arch == devtools::TinyArch::kQwen2) o.tie_word_embeddings = true;
  devtools::make_tiny_model(o);
  return dir;
}

SessionOptions options(const std::string& device, NumericsMode mode) {
  SessionOptions o;
  o.device = device;
  o.mode = mode;
  o.threads = 2;
  o.max_batch = 16;
  o.prefill_chunk_tokens = 64;
  o.kv_budget_bytes = 32 << 20;
  o.recorder.level = RecordLevel::kSteps;
  return o;
}

struct Request {
  std::string prompt;
  GenerationConfig config;
};

std::vector<Request> requests() {
  std::vector<Request> r;
  for (int i = 0; i < 6; ++i) {
    Request q;
    q.prompt = "request " + std::to_string(i) + std::string(static_cast<std::size_t>(7 * i), 'x');
    q.config.max_new_tokens = 12;
    q.config.ignore_eos = true;
    q.config.seed = 100 + static_cast<std::uint64_t>(i);
    q.config.temperature = i % 2 == 0 ? 0.0f : 0.9f;
    q.config.num_return_sequences = i == 3 ? 2 : 1;
    r.push_back(q);
  }
  return r;
}

// Tokens, chain digests and every step digest of each sequence.
struct Outcome {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::uint64_t> digests;
  std::vector<std::vector<std::uint64_t>> steps;
  bool operator==(const Outcome& o) const {
    return tokens == o.tokens && digests == o.digests && steps == o.steps;
  }
};

Outcome outcome(const GenerationResult& r) {
  Outcome o;
  const RunFingerprint fp = RunFingerprint::from_json(r.fingerprint_json);
  for (std::size_t i = 0; i < r.sequences.size(); ++i) {
    o.tokens.push_back(r.sequences[i].tokens);
    o.digests.push_back(r.sequences[i].digest);
    o.steps.push_back(fp.sequences.at(i).step_digests);
  }
  return o;
}

// Runs the requests concurrently (submitted together: batched by the engine).
std::vector<Outcome> run_all(DeterministicSession& s, const std::vector<Request>& rs) {
  std::vector<RequestHandle> handles;
  for (const Request& r : rs) handles.push_back(s.submit(r.prompt, r.config));
  std::vector<Outcome> out;
  for (RequestHandle& h : handles) out.push_back(outcome(h.get()));
  return out;
}

class CudaSessionGpu : public ::testing::Test {
 protected:
  void SetUp() override { DETINFER_REQUIRE_CUDA_DEVICE(); }
};

TEST_F(CudaSessionGpu, CanonicalGenerationEqualsCpuTokenForTokenAndDigestForDigest) {
  for (const auto& [arch, dtype] : {std::pair{devtools::TinyArch::kLlama, core::DType::kF32},
                                    std::pair{devtools::TinyArch::kQwen2, core::DType::kBF16},
                                    std::pair{devtools::TinyArch::kQwen3, core::DType::kBF16}}) {
    const std::string dir = model_dir(arch, dtype);
    auto cpu = DeterministicSession::open(dir, options("cpu", NumericsMode::kCanonical));
    auto gpu = DeterministicSession::open(dir, options("cuda:0", NumericsMode::kCanonical));
    const std::vector<Outcome> want = run_all(cpu, requests());
    EXPECT_TRUE(run_all(gpu, requests()) == want) << dir;
    // Again: now the prompts' full blocks come from the prefix cache (GPU KV blocks).
    EXPECT_TRUE(run_all(gpu, requests()) == want) << dir << " (prefix-cache hits)";
    // One at a time (other batch compositions).
    for (std::size_t i = 0; i < requests().size(); ++i) {
      const Request r = requests()[i];
      EXPECT_TRUE(outcome(gpu.generate(r.prompt, r.config)) == want[i]) << dir << " request " << i;
    }
    const RunFingerprint fp = RunFingerprint::from_json(gpu.generate("fp", {}).fingerprint_json);
    EXPECT_EQ(fp.numerics.device, "cuda");
    EXPECT_EQ(fp.numerics.mode, "canonical");
    ASSERT_TRUE(fp.device.gpu.has_value());
    EXPECT_FALSE(fp.device.gpu->compute_capability.empty());
    EXPECT_FALSE(fp.device.gpu->driver.empty());
  }
}

// Quantized on load (SessionOptions::weights) in canonical mode: the quantized linear's
// kernels (quant.cu) give the CPU session's tokens and digests.
TEST_F(CudaSessionGpu, QuantizedWeightsEqualCpuTokenForToken) {
  const std::string dir = model_dir(devtools::TinyArch::kQwen2, core::DType::kBF16);
  for (const char* weights : {"q8_0", "q4_1"}) {
    SessionOptions c = options("cpu", NumericsMode::kCanonical);
    c.weights = weights;
    SessionOptions g = options("cuda:0", NumericsMode::kCanonical);
    g.weights = weights;
    auto cpu = DeterministicSession::open(dir, c);
    auto gpu = DeterministicSession::open(dir, g);
    EXPECT_TRUE(run_all(gpu, requests()) == run_all(cpu, requests())) << weights;
  }
}

TEST_F(CudaSessionGpu, DeviceInvariantOutputIgnoresBatchingChunkingAndCacheHits) {
  const std::string dir = model_dir(devtools::TinyArch::kQwen2, core::DType::kBF16);
  const std::vector<Request> rs = requests();
  SessionOptions alone_opts = options("cuda", NumericsMode::kDeviceInvariant);
  alone_opts.cache.prefix.enabled = false;
  auto alone = DeterministicSession::open(dir, alone_opts);
  std::vector<Outcome> want;
  for (const Request& r : rs) want.push_back(outcome(alone.generate(r.prompt, r.config)));
  SessionOptions chunked_opts = options("cuda", NumericsMode::kDeviceInvariant);
  chunked_opts.prefill_chunk_tokens = 5;
  auto chunked = DeterministicSession::open(dir, chunked_opts);
  EXPECT_TRUE(run_all(chunked, rs) == want) << "batched, prefill chunks of 5";
  EXPECT_TRUE(run_all(chunked, rs) == want) << "batched, prefix-cache hits";
  const RunFingerprint fp = RunFingerprint::from_json(alone.generate("fp", {}).fingerprint_json);
  EXPECT_EQ(fp.numerics.mode, "device_invariant");
}

}  // namespace
}  // namespace detinfer
