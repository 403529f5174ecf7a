// On-disk tier: one file per entry (<key hex>.kv, header + payload, see entry_codec.h),
// written atomically (temp file + rename), its own byte budget with LRU by access time
// (the file mtime, refreshed on every hit, so the order survives restarts).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/block_store.h"
#include "cache/cache_clock.h"
#include "cache/entry_codec.h"

namespace detinfer::cache {

// Thread-safe. Several processes may share a directory: a file written by another
// process is found by get() (and then indexed); the budget is enforced over the entries
// this process knows (written, read or found at start).
class DiskStore final : public BlockStore {
 public:
  // Creates the directory if needed (throws Error(kUnavailable) naming it if that
  // fails), removes stale temp files, indexes the existing entries and evicts down to the
  // budget.
  DiskStore(std::string directory, std::int64_t budget_bytes, const EntryMagic& magic,
            double error_log_interval_seconds = 60, std::shared_ptr<CacheClock> clock = nullptr);

  const char* name() const override { return "disk"; }
  BytesPtr get(const Hash128& key, std::size_t expected_size) override;
  void put(const Hash128& key, const BytesPtr& payload) override;
  bool contains(const Hash128& key) override;
  void erase(const Hash128& key) override;
  void invalidate_all() override;
  void open_model(const Hash128&) override {}
  CacheTierStats stats() const override;

  // Path of the file of a key (for tests and tools).
  std::string path_of(const Hash128& key) const;

 private:
  struct Entry {
    std::int64_t size = 0;  // file bytes (header + payload)
    std::list<Hash128>::iterator lru;
  };
  using Map = std::unordered_map<Hash128, Entry, Hash128Hash>;

  void scan();
  void touch_locked(const Hash128& key, std::int64_t size);
  void forget_locked(const Hash128& key);
  void evict_locked(std::int64_t need);
  // Sets atime and mtime of an open entry file to "now".
  void stamp_locked(int fd);
  void drop_corrupt_locked(const Hash128& key, const std::string& why);
  void backend_error_locked(const std::string& what);

  const std::string dir_;
  const std::int64_t budget_;
  const EntryMagic magic_;
  RateLimitedLog log_;
  mutable std::mutex mu_;
  Map map_;
  std::list<Hash128> lru_;  // front = most recently used
  std::int64_t bytes_ = 0;
  std::uint64_t temp_counter_ = 0;
  std::int64_t last_stamp_ns_ = 0;
  CacheTierStats stats_;
};

}  // namespace detinfer::cache
