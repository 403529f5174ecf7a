#include "core/byte_budget.h"

#include <algorithm>

#include "core/memory_limits.h"

namespace detinfer::core {

ByteBudget::Lease::Lease(ByteBudget& budget, std::int64_t bytes, std::int64_t trim_at_bytes)
    : budget_(budget), bytes_(std::max<std::int64_t>(0, bytes)), trim_(bytes >= trim_at_bytes) {
  std::unique_lock<std::mutex> lock(budget_.mu_);
  // Fits beside the others, or runs alone when larger than the whole budget.
  budget_.freed_.wait(
      lock, [&] { return budget_.in_use_ == 0 || budget_.in_use_ + bytes_ <= budget_.capacity_; });
  budget_.in_use_ += bytes_;
}

ByteBudget::Lease::~Lease() {
  {
    std::lock_guard<std::mutex> lock(budget_.mu_);
    budget_.in_use_ -= bytes_;
  }
  budget_.freed_.notify_all();
  if (trim_) release_free_heap();
}

std::int64_t ByteBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

}  // namespace detinfer::core
