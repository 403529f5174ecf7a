// What a session holds in memory, against what the kernel says the process holds
// (/proc/self/status VmRSS): the footprint's resident_bytes is honest, a tied embedding is
// kept once (the packed lm_head serves its rows), the mapped safetensors file is not
// resident after the load, and a reserved but unused KV pool costs no memory; the KV that
// generation touches shows up as it is used.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "devtools/model_tools.h"

namespace detinfer {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

std::int64_t vm_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  }
  ADD_FAILURE() << "no VmRSS line in /proc/self/status";
  return 0;
}

// RSS with freed heap memory given back, so that deltas measure what is held.
std::int64_t settled_rss() {
  malloc_trim(0);
  return vm_rss_bytes();
}

// A qwen2-shaped model with a tied, large embedding (16384 x 256 f32 = 16 MiB of 38 MiB),
// no tokenizer (prompts are token ids), so the weights dominate what a session holds.
std::string make_model() {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/session-memory-" +
                          std::to_string(static_cast<long>(getpid()));
  devtools::TinyModelOptions o;
  o.arch = devtools::TinyArch::kQwen2;
  o.dtype = core::DType::kF32;
  o.hidden = 256;
  o.intermediate = 512;
  o.layers = 8;
  o.heads = 4;
  o.kv_heads = 4;
  o.vocab = 16384;
  o.max_positions = 4096;
  o.tie_word_embeddings = true;
  o.seed = 3;
  o.out_dir = dir;
  devtools::make_tiny_model(o);
  std::remove((dir + "/tokenizer.json").c_str());
  std::remove((dir + "/tokenizer_config.json").c_str());
  return dir;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST(SessionMemory, ResidentBytesMatchRssAndAnUnusedKvPoolCostsNothing) {
  if (kSanitized) GTEST_SKIP() << "sanitizer shadow memory and quarantine change RSS";
  // Large blocks always come from (and go back to) mmap: glibc's dynamic threshold would
  // otherwise let the session reuse heap the model generator freed, hiding its cost.
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024);
  const std::string dir = make_model();
  const std::int64_t base = settled_rss();

  SessionOptions so;
  so.threads = 1;
  so.max_batch = 1;
  so.prefill_chunk_tokens = 128;
  so.kv_budget_bytes = 512 * kMiB;  // reserved; only what generation touches is resident
  so.cache.prefix.enabled = false;
  DeterministicSession session = DeterministicSession::open(dir, so);
  const ModelFootprint f = session.footprint();
  const std::int64_t opened = settled_rss() - base;

  // One copy of every weight: a tied embedding adds nothing to the packed lm_head (two
  // copies would be 16 MiB more). Norms and panel padding are the small rest.
  EXPECT_GT(f.resident_bytes, f.weight_bytes * 99 / 100);
  EXPECT_LT(f.resident_bytes, f.weight_bytes * 101 / 100);
  EXPECT_EQ(f.kv_reserved_bytes,
            512 * kMiB / (f.kv_bytes_per_token * 16) * (f.kv_bytes_per_token * 16));
  EXPECT_EQ(f.kv_in_use_bytes, 0);
  // The model is what the open added: not the mapped file, not the 512 MiB pool.
  const std::int64_t tol = 3 * kMiB + f.resident_bytes / 20;
  EXPECT_NEAR(static_cast<double>(opened), static_cast<double>(f.resident_bytes),
              static_cast<double>(tol))
      << "RSS grew by " << opened << " bytes; resident_bytes " << f.resident_bytes;

  // 640 prompt tokens + 64 generated: 44 blocks of 16 tokens (16 KiB of K+V per token).
  std::vector<std::int32_t> prompt(640);
  for (std::size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<std::int32_t>((i * 7919) % 16384);
  GenerationConfig gc;
  gc.max_new_tokens = 64;
  gc.ignore_eos = true;
  ASSERT_EQ(session.generate(prompt, gc).sequences[0].tokens.size(), 64U);
  const ModelFootprint g = session.footprint();
  const std::int64_t generated = settled_rss() - base;
  const std::int64_t kv_touched = 44 * 16 * g.kv_bytes_per_token;
  EXPECT_EQ(g.kv_in_use_bytes, 0);  // the request finished; no prefix cache holds blocks
  EXPECT_GT(g.resident_bytes, f.resident_bytes);  // RoPE rows and step buffers
  EXPECT_NEAR(static_cast<double>(generated), static_cast<double>(g.resident_bytes + kv_touched),
              static_cast<double>(tol))
      << "RSS grew by " << generated << " bytes; resident_bytes " << g.resident_bytes
      << ", KV touched " << kv_touched;
}

}  // namespace
}  // namespace detinfer
