// Long contexts over the paged KV cache: a 16k-token prompt on a small model gives the
// same bits whether it is prefilled in chunks of 4096 or of 1000 tokens (not a multiple
// of the block size), and whether its prefix came from the prefix cache; a request that
// can never fit the KV pool is refused at once with an Error whose message names the
// limit (kv_budget_bytes) and whose field names what the client can change.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/philox.h"
#include "detinfer/session.h"
#include "devtools/model_tools.h"

namespace detinfer {
namespace {

constexpr std::int64_t kPromptTokens = 16000;

// One layer, two heads of 16 dims: attention over 16k tokens stays a few seconds.
const std::string& long_model() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("DETINFER_TEST_TMP");
    devtools::TinyModelOptions o;
    o.out_dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/long-context-model-" +
                std::to_string(static_cast<long>(getpid()));
    o.hidden = 32;
    o.intermediate = 64;
    o.layers = 1;
    o.heads = 2;
    o.kv_heads = 1;
    o.max_positions = 16384;
    o.seed = 17;
    devtools::make_tiny_model(o);
    return o.out_dir;
  }();
  return dir;
}

std::vector<std::int32_t> long_prompt() {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(kPromptTokens));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int32_t>(philox_block(99, i, 0)[0] % 512);
  }
  return ids;
}

SessionOptions options(std::int32_t chunk, bool prefix_cache) {
  SessionOptions o;
  o.threads = 2;
  o.max_batch = 4;
  o.prefill_chunk_tokens = chunk;
  o.cache.prefix.enabled = prefix_cache;
  o.recorder.level = RecordLevel::kOff;
  return o;  // kv_budget_bytes = 0: sized from the model (4 x 16384 tokens)
}

GenerationConfig greedy() {
  GenerationConfig g;
  g.max_new_tokens = 4;
  g.ignore_eos = true;
  return g;
}

TEST(LongContext, SixteenKTokensAreBitwiseEqualAcrossChunkingAndPrefixCache) {
  const std::vector<std::int32_t> prompt = long_prompt();
  DeterministicSession cached = DeterministicSession::open(long_model(), options(4096, true));
  EXPECT_GE(cached.options().kv_budget_bytes, 4 * 16384 * 2 * 16 * 4);  // auto: full contexts
  const GenerationResult cold = cached.generate(prompt, greedy());
  const GenerationResult warm = cached.generate(prompt, greedy());
  EXPECT_EQ(cold.cache.prefix_cached_tokens, 0);
  // Every full block but the last (the last prompt token is always recomputed).
  EXPECT_GE(warm.cache.prefix_cached_tokens, kPromptTokens - 32);
  ASSERT_EQ(cold.sequences.size(), 1u);
  EXPECT_EQ(warm.sequences[0].tokens, cold.sequences[0].tokens);
  EXPECT_EQ(warm.sequences[0].digest, cold.sequences[0].digest);

  DeterministicSession small_chunks =
      DeterministicSession::open(long_model(), options(1000, false));
  const GenerationResult other = small_chunks.generate(prompt, greedy());
  EXPECT_EQ(other.sequences[0].tokens, cold.sequences[0].tokens);
  EXPECT_EQ(other.sequences[0].digest, cold.sequences[0].digest);
}

TEST(LongContext, ARequestLargerThanTheKvPoolNamesTheLimit) {
  SessionOptions o = options(4096, false);
  o.kv_budget_bytes = 1000 * 16 * 2 * 16 * 4;  // 1000 blocks of 16 tokens
  DeterministicSession s = DeterministicSession::open(long_model(), o);
  try {
    s.generate(long_prompt(), greedy());
    FAIL() << "a 16000-token prompt fit a 16000-token pool with 4 tokens to generate";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_EQ(e.field(), "max_new_tokens");  // what a client can change
    EXPECT_NE(e.message().find("KV pool holds 1000"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("kv_budget_bytes"), std::string::npos) << e.message();
  }
  // A request that fits still runs.
  const std::vector<std::int32_t> p = long_prompt();
  EXPECT_EQ(s.generate(std::vector<std::int32_t>(p.begin(), p.begin() + 4000), greedy())
                .sequences[0]
                .tokens.size(),
            4u);
}

}  // namespace
}  // namespace detinfer
