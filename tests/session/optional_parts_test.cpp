// The optional parts of the build (docs/building.md, "Options"): without libtorch the fast
// numerics mode, and without hiredis a Redis cache tier, are a clear Error(kUnsupported)
// naming the option at session open; with them, the session opens and serves.
#include <gtest/gtest.h>

#include <string>

#include "detinfer/error.h"
#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::tiny_model_dir;
using testing::tiny_options;

// Opens a session with `o` and returns the Error it throws (fails the test if none).
Error open_error(const SessionOptions& o) {
  try {
    DeterministicSession::open(tiny_model_dir(), o);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "session opened";
  return Error(ErrorCode::kInternal, "no error");
}

TEST(OptionalParts, FastModeNeedsLibtorch) {
  SessionOptions o = tiny_options();
  o.mode = NumericsMode::kFast;
  if (DETINFER_TEST_WITH_TORCH) {
    auto s = DeterministicSession::open(tiny_model_dir(), o);
    GenerationConfig c;
    c.max_new_tokens = 3;
    c.ignore_eos = true;
    EXPECT_EQ(s.generate("abc", c).sequences.at(0).tokens.size(), 3u);
    return;
  }
  const Error e = open_error(o);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
  EXPECT_EQ(e.field(), "mode");
  EXPECT_NE(std::string(e.what()).find("DETINFER_WITH_TORCH=OFF"), std::string::npos) << e.what();
  // The canonical mode of the same build serves.
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  EXPECT_GT(s.vocab_size(), 0);
}

TEST(OptionalParts, RedisTiersNeedHiredis) {
  if (DETINFER_TEST_WITH_REDIS) {
    GTEST_SKIP() << "built with hiredis: the Redis tiers are tested against a real server in "
                    "session_cache_tests and cache_tests";
  }
  SessionOptions prefix = tiny_options();
  prefix.cache.prefix.redis.enabled = true;
  prefix.cache.redis.host = "127.0.0.1";
  const Error e = open_error(prefix);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
  EXPECT_EQ(e.field(), "redis");
  EXPECT_NE(std::string(e.what()).find("DETINFER_WITH_REDIS=OFF"), std::string::npos) << e.what();

  SessionOptions result = tiny_options();
  result.cache.result.enabled = true;
  result.cache.result.use_redis = true;
  result.cache.redis.host = "127.0.0.1";
  EXPECT_EQ(open_error(result).code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace detinfer
