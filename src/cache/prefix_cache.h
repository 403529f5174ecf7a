// The KV-prefix cache: full KV blocks keyed by the chain of prefix_keys.h, in up to three
// tiers (memory -> disk -> Redis). A lookup returns the longest chain of cached blocks and
// promotes blocks found in a lower tier to the tiers above; an insertion writes through to
// every tier. Tiers fail independently: a failing tier is a miss, never an error.
//
// The memory tier holds COPIES of block payloads (KvCachePool::export_block layout), not
// references to live pool blocks: the pool is owned and serialized by the engine, while the
// cache is shared by threads and outlives sequences; a hit costs one import_block memcpy per
// block (~0.2 MB for Qwen2.5-0.5B), which is small next to the prefill it replaces.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "cache/block_store.h"
#include "cache/cache_clock.h"
#include "cache/prefix_keys.h"
#include "detinfer/cache_options.h"

namespace detinfer::cache {

struct PrefixMatch {
  Hash128 root;
  // Keys of every full block of the prompt; after prefill, the engine inserts blocks
  // blocks.size() .. keys.size()-1 under these keys.
  std::vector<Hash128> keys;
  // The cached chain: blocks[i] is the payload of prompt block i (block_bytes bytes).
  std::vector<BytesPtr> blocks;
  std::int64_t block_size = 0;

  std::int64_t cached_tokens() const {
    return static_cast<std::int64_t>(blocks.size()) * block_size;
  }
};

class PrefixCache {
 public:
  static constexpr std::size_t kAuto = std::numeric_limits<std::size_t>::max();

  // Builds the tiers the options enable (memory budget 0 = 20% of physical memory).
  // Throws Error(kInvalidArgument) for invalid options and Error(kUnavailable) when the
  // disk directory cannot be created; an unreachable Redis is not an error.
  explicit PrefixCache(const PrefixCacheOptions& options, const RedisOptions& redis = {},
                       std::shared_ptr<CacheClock> clock = nullptr);

  // Explicit tiers, any of them null (tests inject failing or instrumented tiers).
  struct Tiers {
    std::unique_ptr<BlockStore> memory;
    std::unique_ptr<BlockStore> disk;
    std::unique_ptr<BlockStore> redis;
  };
  explicit PrefixCache(Tiers tiers);
  ~PrefixCache();

  // Selects what is being cached. Must be called before lookup/insert; calling it again
  // with another model fingerprint purges the memory tier (other keys could never hit).
  // block_bytes must be > 0: payloads of another size are never served.
  void open(const PrefixNamespace& ns);

  // False when no tier is configured (then lookup returns no blocks and insert is a no-op).
  bool enabled() const { return !tiers_.empty(); }

  // The longest chain of cached full blocks of tokens. max_blocks = kAuto leaves at least
  // the last prompt token uncached, since the engine needs its logits. Thread-safe.
  PrefixMatch lookup(const std::vector<std::int32_t>& tokens, std::string_view salt = {},
                     std::size_t max_blocks = kAuto);

  // Keys of every full block of tokens under the current namespace (empty before open()).
  std::vector<Hash128> block_keys(const std::vector<std::int32_t>& tokens,
                                  std::string_view salt = {}) const;
  // Whether the fastest tier already holds the block (not counted as a hit or miss).
  bool contains(const Hash128& key);

  // Stores one block (block_bytes bytes, else Error(kInvalidArgument)) under a key from
  // PrefixMatch::keys in every tier. Best effort and thread-safe.
  void insert(const Hash128& key, BytesPtr payload);
  void insert(const Hash128& key, const void* data, std::size_t size);

  // Drops every entry of the memory and disk tiers (Redis entries expire by TTL).
  void invalidate_all();

  PrefixCacheStats stats() const;

 private:
  enum Tier : std::size_t { kMemory = 0, kDisk = 1, kRedis = 2, kTierCount = 3 };
  struct Slot {
    Tier tier;
    std::unique_ptr<BlockStore> store;
  };
  struct TokenCounters {
    std::atomic<std::int64_t> hit{0};
    std::atomic<std::int64_t> miss{0};
  };

  std::shared_ptr<const PrefixNamespace> current() const;

  std::vector<Slot> tiers_;  // memory, disk, redis order; absent tiers left out
  mutable std::mutex mu_;
  std::shared_ptr<const PrefixNamespace> ns_;
  std::array<TokenCounters, kTierCount> tokens_;
  std::atomic<std::int64_t> lookups_{0};
  std::atomic<std::int64_t> lookup_tokens_{0};
  std::atomic<std::int64_t> cached_tokens_{0};
};

}  // namespace detinfer::cache
