// Test helper: the tiny default model (make_tiny_model) written once per test program.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>

#include "detinfer/error.h"
#include "detinfer/philox.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"

namespace detinfer::testing {

// Same tokens, step digests and text in every sample (bit-level determinism of a result).
inline void expect_same(const GenerationResult& a, const GenerationResult& b,
                        const std::string& what) {
  ASSERT_EQ(a.sequences.size(), b.sequences.size()) << what;
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens) << what << " sample " << i;
    EXPECT_EQ(a.sequences[i].step_digests, b.sequences[i].step_digests) << what << " sample " << i;
    EXPECT_EQ(a.sequences[i].text, b.sequences[i].text) << what << " sample " << i;
  }
}

// Bitwise the same outputs: tokens, text, step and chain digests, finish reason, score and
// logprobs (token ids and the float bits of every logprob, top-N included).
inline void expect_identical(const GenerationResult& a, const GenerationResult& b,
                             const std::string& what) {
  ASSERT_EQ(a.sequences.size(), b.sequences.size()) << what;
  const auto same_bits = [](float x, float y) { return std::memcmp(&x, &y, sizeof(float)) == 0; };
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    const Sequence& x = a.sequences[i];
    const Sequence& y = b.sequences[i];
    EXPECT_EQ(x.tokens, y.tokens) << what << " sample " << i;
    EXPECT_EQ(x.text, y.text) << what << " sample " << i;
    EXPECT_EQ(x.step_digests, y.step_digests) << what << " sample " << i;
    EXPECT_EQ(x.digest, y.digest) << what << " sample " << i;
    EXPECT_EQ(x.finish_reason, y.finish_reason) << what << " sample " << i;
    EXPECT_EQ(x.score, y.score) << what << " sample " << i;
    ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << what;
    for (std::size_t t = 0; t < x.logprobs.size(); ++t) {
      EXPECT_EQ(x.logprobs[t].token, y.logprobs[t].token) << what << " step " << t;
      EXPECT_TRUE(same_bits(x.logprobs[t].logprob, y.logprobs[t].logprob)) << what << " step " << t;
      ASSERT_EQ(x.logprobs[t].top.size(), y.logprobs[t].top.size()) << what;
      for (std::size_t k = 0; k < x.logprobs[t].top.size(); ++k) {
        EXPECT_EQ(x.logprobs[t].top[k].token, y.logprobs[t].top[k].token) << what;
        EXPECT_TRUE(same_bits(x.logprobs[t].top[k].logprob, y.logprobs[t].top[k].logprob))
            << what << " step " << t;
      }
    }
  }
}

// DeterministicSession::open(dir, o) throws Error with `code` and `field`.
inline void expect_open_error(const std::string& dir, const SessionOptions& o, ErrorCode code,
                              const std::string& field, const std::string& what) {
  try {
    DeterministicSession::open(dir, o);
    ADD_FAILURE() << what << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
    EXPECT_EQ(e.field(), field) << what;
  }
}

// The value of one series (`name{labels}` exactly as rendered) in Prometheus text; -1
// when absent.
inline double metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// A path under $DETINFER_TEST_TMP (or /tmp): <prefix><name>.
inline std::string test_tmp_path(const std::string& prefix, const std::string& name) {
  const char* t = std::getenv("DETINFER_TEST_TMP");
  return std::string(t != nullptr ? t : "/tmp") + "/" + prefix + name;
}

inline std::string tiny_model_dir() {
  static std::once_flag once;
  static std::string dir;
  std::call_once(once, [] {
    const char* tmp = std::getenv("DETINFER_TEST_TMP");
    // One folder per process: ctest runs test programs in parallel, and a model being
    // rewritten by one program must never be read half-written by another.
    dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/session-tiny-model-" +
          std::to_string(static_cast<long>(getpid()));
    devtools::TinyModelOptions o;
    o.out_dir = dir;
    o.seed = 6;
    devtools::make_tiny_model(o);
  });
  return dir;
}

inline SessionOptions tiny_options(std::int32_t threads = 1) {
  SessionOptions o;
  o.threads = threads;
  o.max_batch = 16;
  o.prefill_chunk_tokens = 32;
  o.kv_budget_bytes = 16 << 20;
  return o;
}

// The three decoding kinds speculation must not change (docs/speculative.md): greedy,
// seeded top-k sampling and two seeded samples with a repetition penalty, all with top-3
// logprobs and past eos.
inline std::vector<GenerationConfig> greedy_seeded_and_n2(std::int32_t max_new_tokens) {
  GenerationConfig greedy;
  greedy.max_new_tokens = max_new_tokens;
  greedy.ignore_eos = true;
  greedy.logprobs = 3;
  GenerationConfig sampled = greedy;
  sampled.temperature = 0.7f;
  sampled.top_k = 20;
  sampled.seed = 1234;
  GenerationConfig n2 = sampled;
  n2.num_return_sequences = 2;
  n2.repetition_penalty = 1.1f;
  n2.temperature = 0.3f;
  return {greedy, sampled, n2};
}

// Deterministic test randomness: Philox keyed by (seed, stream, i).
struct TestRng {
  std::uint64_t seed;
  std::uint64_t stream;
  std::uint64_t i = 0;
  std::uint32_t next(std::uint32_t n) { return philox_bits(seed, stream, i++, 0) % n; }
};

inline std::vector<std::int32_t> random_ids(TestRng& rng, std::uint32_t max_len,
                                            std::int32_t vocab) {
  std::vector<std::int32_t> p(1 + rng.next(max_len));
  for (auto& t : p) t = static_cast<std::int32_t>(rng.next(static_cast<std::uint32_t>(vocab)));
  return p;
}

// A 70-token prompt of random ids (TestRng{77, stream}): three prefill chunks of 32,
// crossing a 64-key attention chunk.
inline std::vector<std::int32_t> chunk_crossing_prompt(const DeterministicSession& s,
                                                       std::uint64_t stream = 1) {
  TestRng rng{77, stream};
  std::vector<std::int32_t> p(70);
  for (auto& t : p)
    t = static_cast<std::int32_t>(rng.next(static_cast<std::uint32_t>(s.vocab_size())));
  return p;
}

inline GenerationConfig random_config(TestRng& rng) {
  GenerationConfig c;
  c.max_new_tokens = 1 + static_cast<std::int32_t>(rng.next(12));
  switch (rng.next(4)) {
    case 0:
      break;
    case 1:
      c.temperature = 0.8f;
      c.top_k = 40;
      c.seed = rng.next(1000);
      break;
    case 2:
      c.temperature = 1.1f;
      c.top_p = 0.9f;
      c.num_return_sequences = 2;
      c.seed = rng.next(1000);
      break;
    default:
      c.num_beams = 2;
      break;
  }
  return c;
}

}  // namespace detinfer::testing
