#include "cache/memory_store.h"

#include <utility>

#include "core/check.h"

namespace detinfer::cache {

MemoryStore::MemoryStore(std::int64_t budget_bytes, double ttl_seconds,
                         std::shared_ptr<CacheClock> clock)
    : budget_(budget_bytes),
      ttl_ms_(static_cast<std::int64_t>(ttl_seconds * 1000.0)),
      clock_(clock ? std::move(clock) : steady_cache_clock()) {
  if (budget_bytes < 0) {
    fail(ErrorCode::kInvalidArgument, "cache memory tier: budget_bytes must be >= 0, got ",
         budget_bytes);
  }
  if (!(ttl_seconds >= 0)) {
    fail(ErrorCode::kInvalidArgument, "cache memory tier: ttl_seconds must be >= 0, got ",
         ttl_seconds);
  }
}

bool MemoryStore::expired(const Entry& e, std::int64_t now) const {
  return ttl_ms_ > 0 && now - e.inserted_ms >= ttl_ms_;
}

void MemoryStore::remove(Map::iterator it) {
  bytes_ -= static_cast<std::int64_t>(it->second.data->size());
  lru_.erase(it->second.lru);
  map_.erase(it);
}

BytesPtr MemoryStore::get(const Hash128& key, std::size_t expected_size) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  if (expired(it->second, clock_->now_ms())) {
    remove(it);
    ++stats_.expirations;
    ++stats_.misses;
    return nullptr;
  }
  if (expected_size != 0 && it->second.data->size() != expected_size) {
    // Only a caller bug or a key collision gets here; never serve it.
    remove(it);
    ++stats_.corrupt;
    ++stats_.misses;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  ++stats_.hits;
  return it->second.data;
}

bool MemoryStore::make_room(std::int64_t need, std::int64_t now) {
  if (need > budget_) return false;
  // Walks from the least recently used end, removing entries that `pick` selects.
  auto sweep = [&](bool only_expired, std::int64_t* counter) {
    for (auto it = lru_.end(); it != lru_.begin() && bytes_ + need > budget_;) {
      --it;
      auto m = map_.find(*it);
      // use_count 1: only this map holds it; a reader's copy pins it.
      if (m->second.data.use_count() == 1 && (!only_expired || expired(m->second, now))) {
        ++it;  // the next node survives the erase below
        remove(m);
        ++*counter;
      }
    }
  };
  sweep(true, &stats_.expirations);  // expired entries go first, whatever their recency
  sweep(false, &stats_.evictions);
  return bytes_ + need <= budget_;
}

void MemoryStore::put(const Hash128& key, const BytesPtr& payload) {
  if (!payload) return;
  std::lock_guard<std::mutex> g(mu_);
  const std::int64_t now = clock_->now_ms();
  if (auto it = map_.find(key); it != map_.end()) remove(it);
  const auto size = static_cast<std::int64_t>(payload->size());
  if (!make_room(size, now)) {
    ++stats_.rejected;
    return;
  }
  lru_.push_front(key);
  map_.emplace(key, Entry{payload, now, lru_.begin()});
  bytes_ += size;
  ++stats_.insertions;
}

bool MemoryStore::contains(const Hash128& key) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = map_.find(key);
  return it != map_.end() && !expired(it->second, clock_->now_ms());
}

void MemoryStore::erase(const Hash128& key) {
  std::lock_guard<std::mutex> g(mu_);
  if (auto it = map_.find(key); it != map_.end()) remove(it);
}

void MemoryStore::invalidate_all() {
  std::lock_guard<std::mutex> g(mu_);
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

void MemoryStore::open_model(const Hash128& model_fingerprint) {
  std::lock_guard<std::mutex> g(mu_);
  // Keys already differ between models; purging frees the old model's memory at once.
  if (have_model_ && model_ != model_fingerprint) {
    map_.clear();
    lru_.clear();
    bytes_ = 0;
  }
  have_model_ = true;
  model_ = model_fingerprint;
}

void MemoryStore::purge_expired() {
  std::lock_guard<std::mutex> g(mu_);
  const std::int64_t now = clock_->now_ms();
  for (auto it = map_.begin(); it != map_.end();) {
    auto next = std::next(it);
    if (expired(it->second, now)) {
      remove(it);
      ++stats_.expirations;
    }
    it = next;
  }
}

CacheTierStats MemoryStore::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return with_occupancy(stats_, budget_, bytes_, map_.size());
}

}  // namespace detinfer::cache
