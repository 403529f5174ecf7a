// Redis tier against a real redis-server started by the test on a free loopback port.
#include "cache/redis_store.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "cache/memory_store.h"
#include "cache/prefix_cache.h"
#include "cache/result_cache.h"
#include "cache_test_util.h"

namespace detinfer {
namespace {

using testing::FakeClock;
using testing::make_payload;
using testing::RedisServer;
using testing::test_key;

// Direct hiredis access, to inspect and damage what the tier stored.
class RawRedis {
 public:
  explicit RawRedis(int port) {
    timeval tv{1, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  }
  ~RawRedis() {
    if (c_ != nullptr) redisFree(c_);
  }
  bool ok() const { return c_ != nullptr && c_->err == 0; }
  // The value, or "<nil>".
  std::string get(const std::string& key) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, "GET %b", key.data(), key.size()));
    std::string out = r != nullptr && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len)
                                                                    : std::string("<nil>");
    if (r != nullptr) freeReplyObject(r);
    return out;
  }
  void set(const std::string& key, const std::string& value) {
    auto* r = static_cast<redisReply*>(
        redisCommand(c_, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
    if (r != nullptr) freeReplyObject(r);
  }
  long long ttl(const std::string& key) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, "TTL %b", key.data(), key.size()));
    const long long t = r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
    if (r != nullptr) freeReplyObject(r);
    return t;
  }

 private:
  redisContext* c_ = nullptr;
};

class RedisTier : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bin = testing::find_redis_server();
    if (bin.empty()) {
      GTEST_SKIP() << "redis-server not installed (scripts/install-deps.sh provides it); "
                      "the Redis tier is not tested";
    }
    server_ = std::make_unique<RedisServer>(bin);
    ASSERT_TRUE(server_->start()) << "redis-server did not start";
    options_.host = "127.0.0.1";
    options_.port = server_->port();
    // A live server must answer however loaded the machine is: the outcome of a test may
    // not hinge on the 50 ms default. A dead one fails at once (refused, reset, EPIPE).
    options_.connect_timeout_ms = 5000;
    options_.command_timeout_ms = 5000;
    options_.reconnect_backoff_min_ms = 100;
    options_.reconnect_backoff_max_ms = 1000;
  }
  std::unique_ptr<cache::RedisStore> make_store() {
    auto s = std::make_unique<cache::RedisStore>(options_, "detinfer:kv:", 3600,
                                                 cache::kKvBlockMagic, 60.0, clock_);
    s->open_model(model_);
    return s;
  }

  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::unique_ptr<RedisServer> server_;
  RedisOptions options_;
  Hash128 model_ = xxh3_128("model-a");
};

TEST_F(RedisTier, RoundTripKeyLayoutAndTtl) {
  auto store = make_store();
  const cache::BytesPtr p = make_payload(1, 5000);
  store->put(test_key(1), p);
  const std::string key = "detinfer:kv:" + model_.hex() + ":" + test_key(1).hex();
  EXPECT_EQ(store->redis_key(test_key(1)), key);
  RawRedis raw(server_->port());
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw.get(key).size(), 5000 + cache::kEntryHeaderBytes);
  const long long ttl = raw.ttl(key);
  EXPECT_GT(ttl, 3500);
  EXPECT_LE(ttl, 3600);
  // Another process (another connection) sees the entry.
  auto other = make_store();
  const cache::BytesPtr got = other->get(test_key(1), 5000);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, *p);
  EXPECT_FALSE(other->get(test_key(2), 5000));
  EXPECT_EQ(other->stats().hits, 1);
  EXPECT_EQ(other->stats().misses, 1);
  EXPECT_EQ(other->stats().backend_errors, 0);
  // Another model: another key prefix, no hit.
  other->open_model(xxh3_128("model-b"));
  EXPECT_FALSE(other->get(test_key(1), 5000));
}

TEST_F(RedisTier, CorruptValuesAreDetectedDeletedAndBypassed) {
  auto store = make_store();
  RawRedis raw(server_->port());
  ASSERT_TRUE(raw.ok());
  const std::string good =
      cache::encode_entry(cache::kKvBlockMagic, test_key(1), *make_payload(1, 3000));
  std::string flipped = good;
  flipped[cache::kEntryHeaderBytes + 100] ^= 0x04;
  const std::string truncated = good.substr(0, good.size() - 7);
  const std::string wrong_key =
      cache::encode_entry(cache::kKvBlockMagic, test_key(2), *make_payload(1, 3000));
  const std::string garbage = "not a cache entry";
  int n = 0;
  for (const std::string& bad : {flipped, truncated, wrong_key, garbage}) {
    const std::string key = store->redis_key(test_key(1));
    raw.set(key, bad);
    EXPECT_FALSE(store->get(test_key(1), 3000)) << "case " << n;
    EXPECT_EQ(raw.get(key), "<nil>") << "case " << n << ": corrupt entry not deleted";
    ++n;
    EXPECT_EQ(store->stats().corrupt, n);
  }
  raw.set(store->redis_key(test_key(1)), good);
  EXPECT_TRUE(store->get(test_key(1), 3000));
  EXPECT_EQ(store->stats().backend_errors, 0);
}

TEST_F(RedisTier, ServerDownIsAMissAndRestartResumes) {
  auto store = make_store();
  store->put(test_key(1), make_payload(1, 1000));
  ASSERT_TRUE(store->get(test_key(1), 1000));
  server_->kill();
  // A large write into the dead connection: EPIPE, and no SIGPIPE may kill the process.
  store->put(test_key(50), make_payload(50, 8 << 20));
  EXPECT_EQ(store->stats().backend_errors, 1);
  // Every operation degrades to a miss without throwing.
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(store->get(test_key(1), 1000));
    store->put(test_key(100 + i), make_payload(i, 1000));
  }
  const CacheTierStats down = store->stats();
  EXPECT_GE(down.backend_errors, 1);
  // While waiting out the backoff nothing is attempted: one failure, not forty.
  EXPECT_LE(down.backend_errors, 2);
  ASSERT_TRUE(server_->start(options_.port));
  clock_->advance_ms(options_.reconnect_backoff_max_ms);  // past any backoff
  store->put(test_key(2), make_payload(2, 1000));
  const cache::BytesPtr got = store->get(test_key(2), 1000);
  ASSERT_TRUE(got) << "caching did not resume after the restart";
  EXPECT_EQ(*got, *make_payload(2, 1000));
}

TEST_F(RedisTier, UnreachableFromTheStartIsAMiss) {
  server_->kill();
  auto store = make_store();
  EXPECT_FALSE(store->get(test_key(1), 10));
  store->put(test_key(1), make_payload(1, 10));
  EXPECT_EQ(store->stats().misses, 1);
  EXPECT_EQ(store->stats().rejected, 1);
  EXPECT_EQ(store->stats().backend_errors, 1);
}

// Memory + Redis behind the prefix cache: killing Redis mid-run never turns a lookup or an
// insertion into an error, and the blocks served are always the inserted ones.
TEST_F(RedisTier, PrefixCacheSurvivesRedisCrash) {
  cache::PrefixCache::Tiers tiers;
  auto* memory = new cache::MemoryStore(1 << 20, 0);
  tiers.memory.reset(memory);
  tiers.redis = make_store();
  cache::PrefixCache cache(std::move(tiers));
  cache::PrefixNamespace ns;
  ns.model_fingerprint = model_;
  ns.block_size = 4;
  ns.block_bytes = 512;
  cache.open(ns);
  auto run = [&](std::int32_t base) {
    std::vector<std::int32_t> t(17);
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = base + static_cast<std::int32_t>(i % 8);
    cache::PrefixMatch m = cache.lookup(t);
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
      EXPECT_EQ(*m.blocks[i], *make_payload(m.keys[i].low, 512));
    }
    for (std::size_t i = m.blocks.size(); i < m.keys.size(); ++i) {
      cache.insert(m.keys[i], make_payload(m.keys[i].low, 512));
    }
    return m.cached_tokens();
  };
  EXPECT_EQ(run(1), 0);
  memory->invalidate_all();
  EXPECT_EQ(run(1), 16);  // from Redis, promoted to memory
  EXPECT_EQ(cache.stats().redis.hits, 4);
  server_->kill();
  EXPECT_EQ(run(1), 16);  // memory still serves
  EXPECT_EQ(run(2), 0);   // new prefix: Redis down, inserted into memory only
  memory->invalidate_all();
  EXPECT_EQ(run(2), 0);  // neither tier has it: a miss, not an error
  ASSERT_TRUE(server_->start(options_.port));
  clock_->advance_ms(options_.reconnect_backoff_max_ms);
  EXPECT_EQ(run(3), 0);
  memory->invalidate_all();
  EXPECT_EQ(run(3), 16);  // written to and served from the restarted Redis
  EXPECT_GE(cache.stats().redis.backend_errors, 1);
}

// A second process writes blocks; this one reads them (how several detinfer processes
// share one cache).
TEST_F(RedisTier, BlocksWrittenByAnotherProcessAreServed) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto writer = make_store();
    for (std::uint64_t i = 0; i < 3; ++i) writer->put(test_key(i), make_payload(i, 4096));
    ::_exit(writer->stats().insertions == 3 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto reader = make_store();
  for (std::uint64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(reader->contains(test_key(i)));
    const cache::BytesPtr got = reader->get(test_key(i), 4096);
    ASSERT_TRUE(got) << i;
    EXPECT_EQ(*got, *make_payload(i, 4096));
  }
  EXPECT_FALSE(reader->contains(test_key(3)));
}

TEST_F(RedisTier, ResultCacheSharedThroughRedis) {
  ResultCacheOptions o;
  o.enabled = true;
  o.use_redis = true;
  cache::ResultCache a(o, options_, clock_);
  cache::ResultCache b(o, options_, clock_);
  a.open_model(model_);
  b.open_model(model_);
  GenerationResult r;
  r.seed = 9;
  r.prompt_tokens = {1, 2, 3};
  r.sequences.resize(1);
  r.sequences[0].tokens = {4, 5};
  r.sequences[0].text = "four five";
  r.sequences[0].digest = 77;
  const Hash128 k = test_key(42);
  a.put(k, r);
  auto hit = b.get(k);  // from Redis, promoted to b's memory
  ASSERT_TRUE(hit);
  EXPECT_TRUE(cache::compare_results(*hit, r).equal);
  EXPECT_TRUE(b.get(k));
  EXPECT_EQ(b.stats().redis.hits, 1);
  EXPECT_EQ(b.stats().memory.hits, 1);
  // A damaged value in Redis is a miss for a third process, and is deleted.
  RawRedis raw(server_->port());
  const std::string key = "detinfer:result:" + model_.hex() + ":" + k.hex();
  std::string value = raw.get(key);
  ASSERT_NE(value, "<nil>");
  value[value.size() - 1] ^= 0x20;
  raw.set(key, value);
  cache::ResultCache c(o, options_, clock_);
  c.open_model(model_);
  EXPECT_FALSE(c.get(k));
  EXPECT_EQ(c.stats().redis.corrupt, 1);
  EXPECT_EQ(raw.get(key), "<nil>");
}

}  // namespace
}  // namespace detinfer
