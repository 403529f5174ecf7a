#include "cache/memory_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "cache_test_util.h"
#include "detinfer/error.h"

namespace detinfer {
namespace {

using testing::FakeClock;
using testing::make_payload;
using testing::test_key;

TEST(MemoryStore, StoresAndServesTheSameBytes) {
  cache::MemoryStore m(1 << 20, 0);
  const cache::BytesPtr p = make_payload(1, 4096);
  m.put(test_key(1), p);
  const cache::BytesPtr got = m.get(test_key(1), 4096);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, *p);
  EXPECT_FALSE(m.get(test_key(2), 0));
  // A payload of another size than expected is never served (and dropped).
  EXPECT_FALSE(m.get(test_key(1), 4095));
  EXPECT_FALSE(m.get(test_key(1), 0));
  const CacheTierStats s = m.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.corrupt, 1);
  EXPECT_EQ(s.entries, 0);
}

// A stream of distinct entries of random sizes: the budget holds after every insertion.
TEST(MemoryStore, BudgetNeverExceeded) {
  const std::int64_t budget = 100000;
  cache::MemoryStore m(budget, 0);
  std::uint64_t x = 77;
  std::int64_t rejected = 0;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const std::size_t size = 1 + (x >> 33) % 30000;
    m.put(test_key(i), make_payload(i, size));
    const CacheTierStats s = m.stats();
    ASSERT_LE(s.bytes, budget) << "after insertion " << i;
    rejected = s.rejected;
  }
  const CacheTierStats s = m.stats();
  EXPECT_EQ(rejected, 0);
  EXPECT_EQ(s.insertions, 2000);
  EXPECT_GT(s.evictions, 1500);
  // Larger than the whole budget: rejected, not stored, nothing evicted for it.
  const std::int64_t evictions = s.evictions;
  m.put(test_key(99999), make_payload(1, budget + 1));
  EXPECT_EQ(m.stats().rejected, 1);
  EXPECT_EQ(m.stats().evictions, evictions);
}

TEST(MemoryStore, EvictsLeastRecentlyUsedFirst) {
  cache::MemoryStore m(3000, 0);
  for (std::uint64_t i = 1; i <= 3; ++i) m.put(test_key(i), make_payload(i, 1000));
  ASSERT_TRUE(m.get(test_key(1), 1000));  // 1 becomes most recent; 2 is now the LRU
  m.put(test_key(4), make_payload(4, 1000));
  EXPECT_TRUE(m.get(test_key(1), 1000));
  EXPECT_FALSE(m.get(test_key(2), 1000));
  EXPECT_TRUE(m.get(test_key(3), 1000));
  EXPECT_TRUE(m.get(test_key(4), 1000));
  EXPECT_EQ(m.stats().evictions, 1);
}

TEST(MemoryStore, ReferencedEntriesAreNotEvicted) {
  cache::MemoryStore m(2000, 0);
  m.put(test_key(1), make_payload(1, 1000));
  m.put(test_key(2), make_payload(2, 1000));
  const cache::BytesPtr held = m.get(test_key(2), 1000);  // in use by a sequence
  ASSERT_TRUE(m.get(test_key(1), 1000));                  // 2 is now the LRU, but referenced
  m.put(test_key(3), make_payload(3, 1000));
  EXPECT_FALSE(m.get(test_key(1), 1000));
  EXPECT_TRUE(m.get(test_key(2), 1000));
  // Everything referenced: the insertion is rejected rather than exceeding the budget.
  const cache::BytesPtr held3 = m.get(test_key(3), 1000);
  m.put(test_key(4), make_payload(4, 1000));
  EXPECT_EQ(m.stats().rejected, 1);
  EXPECT_LE(m.stats().bytes, 2000);
  EXPECT_EQ(*held, *make_payload(2, 1000));
}

TEST(MemoryStore, ExpiredEntriesAreNeverServed) {
  auto clock = std::make_shared<FakeClock>();
  cache::MemoryStore m(1 << 20, 10.0, clock);
  m.put(test_key(1), make_payload(1, 100));
  clock->advance_ms(9999);
  EXPECT_TRUE(m.get(test_key(1), 100));  // a hit does not extend the TTL
  clock->advance_ms(1);
  EXPECT_FALSE(m.get(test_key(1), 100));
  EXPECT_EQ(m.stats().expirations, 1);
  EXPECT_EQ(m.stats().entries, 0);
  // purge_expired drops them without a lookup.
  m.put(test_key(2), make_payload(2, 100));
  clock->advance_s(3600);
  m.put(test_key(3), make_payload(3, 100));
  m.purge_expired();
  EXPECT_EQ(m.stats().entries, 1);
  EXPECT_EQ(m.stats().expirations, 2);
  // Re-inserting refreshes the entry.
  clock->advance_ms(9000);
  m.put(test_key(3), make_payload(3, 100));
  clock->advance_ms(9000);
  EXPECT_TRUE(m.get(test_key(3), 100));
}

TEST(MemoryStore, ExpiredEntriesGoBeforeLiveOnesWhenMakingRoom) {
  auto clock = std::make_shared<FakeClock>();
  cache::MemoryStore m(2000, 10.0, clock);
  m.put(test_key(1), make_payload(1, 1000));
  clock->advance_ms(6000);
  m.put(test_key(2), make_payload(2, 1000));
  ASSERT_TRUE(m.get(test_key(1), 1000));  // 1 is most recent but about to expire
  clock->advance_ms(5000);
  m.put(test_key(3), make_payload(3, 1000));
  EXPECT_TRUE(m.get(test_key(2), 1000));
  EXPECT_EQ(m.stats().expirations, 1);
  EXPECT_EQ(m.stats().evictions, 0);
}

TEST(MemoryStore, InvalidateAllAndModelSwitchPurge) {
  cache::MemoryStore m(1 << 20, 0);
  m.open_model(xxh3_128("a"));
  m.put(test_key(1), make_payload(1, 100));
  m.open_model(xxh3_128("a"));  // same model: kept
  EXPECT_TRUE(m.get(test_key(1), 100));
  m.open_model(xxh3_128("b"));  // another model: purged
  EXPECT_FALSE(m.get(test_key(1), 100));
  EXPECT_EQ(m.stats().bytes, 0);
  m.put(test_key(2), make_payload(2, 100));
  m.invalidate_all();
  EXPECT_FALSE(m.get(test_key(2), 100));
  EXPECT_EQ(m.stats().entries, 0);
}

TEST(MemoryStore, RejectsInvalidOptions) {
  EXPECT_THROW(cache::MemoryStore(-1, 0), Error);
  EXPECT_THROW(cache::MemoryStore(10, -1), Error);
}

}  // namespace
}  // namespace detinfer
