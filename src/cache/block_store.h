// The interface every cache tier implements (memory, disk, Redis), so that the prefix and
// result caches can stack tiers and tests can inject failing ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "detinfer/cache_options.h"
#include "detinfer/hash.h"

namespace detinfer::cache {

// Immutable payload bytes. Shared, never modified after insertion: a reader holding one
// keeps valid bytes even if the entry is evicted meanwhile.
using Bytes = std::vector<std::uint8_t>;
using BytesPtr = std::shared_ptr<const Bytes>;

struct Hash128Hash {
  std::size_t operator()(const Hash128& h) const noexcept {
    return static_cast<std::size_t>(h.low ^ (h.high * 0x9e3779b97f4a7c15ull));
  }
};

// A tier's counters completed with its current occupancy.
inline CacheTierStats with_occupancy(CacheTierStats s, std::int64_t budget, std::int64_t bytes,
                                     std::size_t entries) {
  s.budget_bytes = budget;
  s.bytes = bytes;
  s.entries = static_cast<std::int64_t>(entries);
  return s;
}

class BlockStore {
 public:
  virtual ~BlockStore() = default;
  // "memory", "disk" or "redis": used in log lines.
  virtual const char* name() const = 0;
  // The payload stored under key, or nullptr on a miss. An expired, corrupt, truncated or
  // wrong-key entry, a payload of another size than expected_size (0 = any size) and an
  // unreachable backend are all misses (and counted). Never throws.
  virtual BytesPtr get(const Hash128& key, std::size_t expected_size) = 0;
  // Best effort: the entry may be dropped (budget, backend down). Never throws.
  virtual void put(const Hash128& key, const BytesPtr& payload) = 0;
  // Whether a servable entry is present, without counting a hit or a miss or refreshing
  // its recency (used to skip re-inserting blocks that are already cached).
  virtual bool contains(const Hash128& /*key*/) { return false; }
  // Removes one entry if present.
  virtual void erase(const Hash128& key) = 0;
  // Drops every entry this store can enumerate (Redis: none; its entries expire by TTL).
  virtual void invalidate_all() = 0;
  // A different model is now served. Memory purges; Redis switches its key prefix.
  virtual void open_model(const Hash128& model_fingerprint) = 0;
  virtual CacheTierStats stats() const = 0;
};

}  // namespace detinfer::cache
