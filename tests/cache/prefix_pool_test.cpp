#include "cache/prefix_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cache/memory_store.h"
#include "cache_test_util.h"
#include "detinfer/error.h"

namespace detinfer {
namespace {

// The members of KvCachePool that the glue uses, over plain memory.
class FakePool {
 public:
  FakePool(std::int64_t capacity, std::int64_t block_bytes)
      : bytes_(block_bytes), data_(static_cast<std::size_t>(capacity * block_bytes)) {
    for (std::int32_t b = static_cast<std::int32_t>(capacity) - 1; b >= 0; --b) free_.push_back(b);
  }
  std::int64_t block_bytes() const { return bytes_; }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  std::int32_t allocate() {
    if (free_.empty()) throw Error(ErrorCode::kResourceExhausted, "pool full");
    const std::int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  void import_block(std::int32_t b, const void* src) {
    std::memcpy(at(b), src, static_cast<std::size_t>(bytes_));
  }
  void export_block(std::int32_t b, void* dst) const {
    std::memcpy(dst, at(b), static_cast<std::size_t>(bytes_));
  }
  // "Prefill": deterministic content from the token ids of the block's prefix.
  void fill(std::int32_t b, std::uint64_t seed) {
    const cache::BytesPtr p = testing::make_payload(seed, static_cast<std::size_t>(bytes_));
    std::memcpy(at(b), p->data(), p->size());
  }
  const std::uint8_t* at(std::int32_t b) const { return data_.data() + b * bytes_; }
  std::uint8_t* at(std::int32_t b) { return data_.data() + b * bytes_; }

 private:
  std::int64_t bytes_;
  std::vector<std::uint8_t> data_;
  std::vector<std::int32_t> free_;
};

constexpr std::int64_t kBlock = 4;
constexpr std::int64_t kBytes = 256;

TEST(PrefixPool, RestoreCopiesExactlyWhatPublishStored) {
  cache::PrefixCache::Tiers tiers;
  tiers.memory = std::make_unique<cache::MemoryStore>(1 << 20, 0);
  cache::PrefixCache cache(std::move(tiers));
  cache::PrefixNamespace ns;
  ns.model_fingerprint = xxh3_128("m");
  ns.block_size = kBlock;
  ns.block_bytes = kBytes;
  cache.open(ns);
  FakePool pool(64, kBytes);
  const std::vector<std::int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};

  // Request 1: nothing cached; "prefill" 4 blocks, publish the 3 full ones.
  std::vector<std::int32_t> t1;
  EXPECT_EQ(cache::restore_prefix_blocks(cache, prompt, "", pool, t1), 0);
  for (int i = 0; i < 4; ++i) {
    t1.push_back(pool.allocate());
    pool.fill(t1.back(), 100 + static_cast<std::uint64_t>(i));
  }
  EXPECT_EQ(cache::publish_prefix_blocks(cache, prompt, "", pool, t1), 3);
  EXPECT_EQ(cache::publish_prefix_blocks(cache, prompt, "", pool, t1), 0);  // already cached

  // Request 2, same prompt: 3 blocks restored into fresh pool blocks, bitwise equal.
  std::vector<std::int32_t> t2;
  EXPECT_EQ(cache::restore_prefix_blocks(cache, prompt, "", pool, t2), 12);
  ASSERT_EQ(t2.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NE(t2[i], t1[i]);
    EXPECT_EQ(std::memcmp(pool.at(t2[i]), pool.at(t1[i]), kBytes), 0) << i;
  }
  // Another salt: nothing.
  std::vector<std::int32_t> t3;
  EXPECT_EQ(cache::restore_prefix_blocks(cache, prompt, "other", pool, t3), 0);
}

TEST(PrefixPool, RestoreStopsWhenThePoolIsFull) {
  cache::PrefixCache::Tiers tiers;
  tiers.memory = std::make_unique<cache::MemoryStore>(1 << 20, 0);
  cache::PrefixCache cache(std::move(tiers));
  cache::PrefixNamespace ns;
  ns.block_size = kBlock;
  ns.block_bytes = kBytes;
  cache.open(ns);
  FakePool big(8, kBytes);
  const std::vector<std::int32_t> prompt(4 * kBlock + 1, 3);
  std::vector<std::int32_t> t;
  for (int i = 0; i < 4; ++i) t.push_back(big.allocate());
  EXPECT_EQ(cache::publish_prefix_blocks(cache, prompt, "", big, t), 4);
  FakePool small(2, kBytes);
  std::vector<std::int32_t> s;
  EXPECT_EQ(cache::restore_prefix_blocks(cache, prompt, "", small, s), 2 * kBlock);
  EXPECT_EQ(small.free_blocks(), 0);
}

}  // namespace
}  // namespace detinfer
