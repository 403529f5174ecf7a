#include "cache/prefix_keys.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "detinfer/error.h"

namespace detinfer {
namespace {

cache::PrefixNamespace base_ns() {
  cache::PrefixNamespace ns;
  ns.model_fingerprint = xxh3_128("model-a");
  ns.block_size = 16;
  ns.block_bytes = 1024;
  return ns;
}

std::vector<std::int32_t> tokens(std::size_t n, std::uint32_t seed) {
  std::vector<std::int32_t> t(n);
  std::uint32_t x = seed;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<std::int32_t>(x % 151000u) + 1;
  }
  return t;
}

// The chain is defined in terms of XXH3-128 of concatenated bytes; the streaming Hasher
// over the same fields must agree with the optimized one-shot implementation.
TEST(PrefixKeys, ChainMatchesDefinition) {
  const cache::PrefixNamespace ns = base_ns();
  Hasher r;
  r.update_hash(ns.model_fingerprint)
      .update_u32(0)
      .update_u32(1)
      .update_field("f32")
      .update_u64(16)
      .update_field("");
  const Hash128 root = cache::prefix_root(ns);
  EXPECT_EQ(root, r.digest128());
  for (std::int64_t bs : {1, 16, 64, 100}) {
    const auto t = tokens(static_cast<std::size_t>(bs) * 3 + static_cast<std::size_t>(bs) / 2, 7);
    const auto keys = cache::prefix_block_keys(root, t.data(), t.size(), bs);
    ASSERT_EQ(keys.size(), 3u);
    Hash128 prev = root;
    for (std::size_t b = 0; b < 3; ++b) {
      Hasher h;
      h.update_hash(prev);
      for (std::int64_t i = 0; i < bs; ++i) {
        h.update_u32(static_cast<std::uint32_t>(t[b * static_cast<std::size_t>(bs) + i]));
      }
      EXPECT_EQ(keys[b], h.digest128()) << "block " << b << " block size " << bs;
      prev = keys[b];
    }
  }
}

TEST(PrefixKeys, EveryNamespaceFieldChangesTheRoot) {
  std::vector<Hash128> roots;
  roots.push_back(cache::prefix_root(base_ns()));
  {
    cache::PrefixNamespace ns = base_ns();
    ns.model_fingerprint.low ^= 1;  // one bit of the model
    roots.push_back(cache::prefix_root(ns));
  }
  {
    cache::PrefixNamespace ns = base_ns();
    ns.mode = NumericsMode::kFast;
    roots.push_back(cache::prefix_root(ns));
  }
  {
    cache::PrefixNamespace ns = base_ns();
    ns.spec_version = 2;
    roots.push_back(cache::prefix_root(ns));
  }
  {
    cache::PrefixNamespace ns = base_ns();
    ns.kv_dtype = "bf16";
    roots.push_back(cache::prefix_root(ns));
  }
  {
    cache::PrefixNamespace ns = base_ns();
    ns.block_size = 32;
    roots.push_back(cache::prefix_root(ns));
  }
  roots.push_back(cache::prefix_root(base_ns(), "tenant-1"));
  roots.push_back(cache::prefix_root(base_ns(), "tenant-2"));
  std::set<Hash128> unique(roots.begin(), roots.end());
  EXPECT_EQ(unique.size(), roots.size());
  // Same inputs, same root.
  EXPECT_EQ(cache::prefix_root(base_ns(), "tenant-1"), cache::prefix_root(base_ns(), "tenant-1"));
  // block_bytes is validated by the cache, it does not name a different computation.
  cache::PrefixNamespace other_bytes = base_ns();
  other_bytes.block_bytes = 7;
  EXPECT_EQ(cache::prefix_root(other_bytes), cache::prefix_root(base_ns()));
}

TEST(PrefixKeys, TokenChangeAffectsOnlyItsBlockAndLater) {
  const Hash128 root = cache::prefix_root(base_ns());
  auto t = tokens(16 * 6, 3);
  const auto a = cache::prefix_block_keys(root, t.data(), t.size(), 16);
  t[16 * 3 + 9] += 1;
  const auto b = cache::prefix_block_keys(root, t.data(), t.size(), 16);
  for (std::size_t i = 0; i < 6; ++i) {
    if (i < 3) {
      EXPECT_EQ(a[i], b[i]) << i;
    } else {
      EXPECT_NE(a[i], b[i]) << i;
    }
  }
}

TEST(PrefixKeys, SameBlockTokensAtAnotherPositionGetAnotherKey) {
  const Hash128 root = cache::prefix_root(base_ns());
  std::vector<std::int32_t> t = tokens(16, 5);
  t.insert(t.end(), t.begin(), t.end());  // block 1 repeats block 0
  const auto keys = cache::prefix_block_keys(root, t.data(), t.size(), 16);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_NE(keys[0], keys[1]);
}

TEST(PrefixKeys, OnlyFullBlocksAndNegativeIdsAreLittleEndianU32) {
  const Hash128 root = cache::prefix_root(base_ns());
  const auto t = tokens(47, 9);
  EXPECT_EQ(cache::prefix_block_keys(root, t.data(), t.size(), 16).size(), 2u);
  EXPECT_EQ(cache::prefix_block_keys(root, t.data(), 15, 16).size(), 0u);
  const std::int32_t neg[1] = {-1};
  Hasher h;
  h.update_hash(root).update_u32(0xffffffffu);
  EXPECT_EQ(cache::prefix_next_key(root, neg, 1), h.digest128());
  EXPECT_THROW(cache::prefix_block_keys(root, t.data(), t.size(), 0), Error);
}

}  // namespace
}  // namespace detinfer
