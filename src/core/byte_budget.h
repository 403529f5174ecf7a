// A budget of bytes that concurrent work shares (issue 33: 64 concurrent 1 MB chat
// requests each held tens of MB at once). A caller states what its work may hold at its
// peak and waits until that fits; work larger than the whole budget runs alone, so
// nothing waits forever and nothing is refused for its size here.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace detinfer::core {

class ByteBudget {
 public:
  explicit ByteBudget(std::int64_t capacity_bytes) : capacity_(capacity_bytes) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Holds `bytes` of the budget until destroyed; then gives the freed heap back to the
  // system (release_free_heap) when it held at least `trim_at_bytes`.
  class Lease {
   public:
    Lease(ByteBudget& budget, std::int64_t bytes, std::int64_t trim_at_bytes);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    ByteBudget& budget_;
    std::int64_t bytes_;
    bool trim_;
  };

  std::int64_t capacity() const { return capacity_; }
  std::int64_t in_use() const;

 private:
  const std::int64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::int64_t in_use_ = 0;
};

}  // namespace detinfer::core
