// In-process tier: a byte-budgeted LRU map of immutable payloads with a TTL.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cache/block_store.h"
#include "cache/cache_clock.h"

namespace detinfer::cache {

// Thread-safe. Invariants, checked by the tests after every insertion: the payload bytes
// held never exceed the budget, and an entry past its TTL is never returned.
// An entry is "referenced" while a reader still holds the BytesPtr returned by get();
// eviction skips referenced entries (they are in use), so an insertion that would need
// to evict only referenced entries is rejected instead.
class MemoryStore final : public BlockStore {
 public:
  // budget_bytes >= 0; ttl_seconds 0 = no TTL.
  MemoryStore(std::int64_t budget_bytes, double ttl_seconds,
              std::shared_ptr<CacheClock> clock = nullptr);

  const char* name() const override { return "memory"; }
  BytesPtr get(const Hash128& key, std::size_t expected_size) override;
  void put(const Hash128& key, const BytesPtr& payload) override;
  bool contains(const Hash128& key) override;
  void erase(const Hash128& key) override;
  void invalidate_all() override;
  void open_model(const Hash128& model_fingerprint) override;
  CacheTierStats stats() const override;

  std::int64_t budget_bytes() const { return budget_; }
  // Drops every expired entry now (otherwise they go when looked up or evicted).
  void purge_expired();

 private:
  struct Entry {
    BytesPtr data;
    std::int64_t inserted_ms = 0;
    std::list<Hash128>::iterator lru;
  };
  using Map = std::unordered_map<Hash128, Entry, Hash128Hash>;

  bool expired(const Entry& e, std::int64_t now) const;
  void remove(Map::iterator it);
  // Evicts unreferenced entries, least recently used first, until `need` more bytes fit.
  bool make_room(std::int64_t need, std::int64_t now);

  const std::int64_t budget_;
  const std::int64_t ttl_ms_;
  std::shared_ptr<CacheClock> clock_;
  mutable std::mutex mu_;
  Map map_;
  std::list<Hash128> lru_;  // front = most recently used
  std::int64_t bytes_ = 0;
  bool have_model_ = false;
  Hash128 model_;
  CacheTierStats stats_;
};

}  // namespace detinfer::cache
