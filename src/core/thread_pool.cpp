#include "core/thread_pool.h"

#include <algorithm>
#include <exception>

#include "core/check.h"

namespace detinfer::core {

namespace {
thread_local bool t_inside_pool = false;

// Polling budget, adapted to the machine: each wait polls up to spin_budget_ times, then
// sleeps. A wait that polling satisfied doubles the budget (up to kMaxSpin); one that had
// to sleep halves it (down to kMinSpin), so on a loaded machine, where the awaited thread
// is often not running, the pool burns less of the cores that thread needs.
// The floor matters more than the adaptation: with a floor of 32 polls (~1 us) the budget
// collapsed on a quiet 2-core VM too (the waits across a step's lm_head or between steps
// fail), every region then paid a futex sleep and wake (tens of microseconds through the
// hypervisor), and 2-thread decode of the 135M shape ran at 0.5x of 1 thread; a floor of
// 1024 polls (~36 us with this CPU's ~35 ns pause, about one futex round trip) gives
// 1.7x (docs/performance.md, "Thread pool"). kMaxSpin: 4096 polls, ~145 us.
constexpr int kMaxSpin = 1 << 12;
constexpr int kMinSpin = 1 << 10;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  if (num_threads < 1 || num_threads > 1024) {
    fail(ErrorCode::kInvalidArgument, "thread count must be 1..1024, got ", num_threads);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  spin_ = cores != 0 && static_cast<unsigned>(num_threads) <= cores;
  spin_budget_.store(kMinSpin, std::memory_order_relaxed);
  workers_.reserve(static_cast<std::size_t>(num_threads - 1));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

template <typename Pred>
bool ThreadPool::spin_until(Pred pred) {
  if (!spin_) return pred();
  const int budget = spin_budget_.load(std::memory_order_relaxed);
  for (int i = 0; i < budget; ++i) {
    if (pred()) {
      if (budget < kMaxSpin) spin_budget_.store(budget * 2, std::memory_order_relaxed);
      return true;
    }
    cpu_relax();
  }
  if (budget > kMinSpin) spin_budget_.store(budget / 2, std::memory_order_relaxed);
  return pred();
}

void ThreadPool::run_chunk(int index) {
  const std::int64_t per = (n_ + chunks_ - 1) / chunks_;
  const std::int64_t begin = per * index;
  const std::int64_t end = std::min(n_, begin + per);
  if (begin >= end) return;
  try {
    (*fn_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

namespace {
constexpr std::uint32_t ticket_gen(std::uint64_t t) { return static_cast<std::uint32_t>(t >> 32); }
constexpr int ticket_count(std::uint64_t t) { return static_cast<int>((t >> 16) & 0xffff); }
constexpr int ticket_next(std::uint64_t t) { return static_cast<int>(t & 0xffff); }
constexpr int kMaxChunks = 0xffff;
}  // namespace

void ThreadPool::run_chunks(std::uint32_t gen, bool notify) {
  std::uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (ticket_gen(t) != gen || ticket_next(t) >= ticket_count(t)) return;
    // A successful claim means job `gen` is still running (its caller waits for this
    // chunk), so fn_, n_ and chunks_ are that job's.
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      continue;
    }
    const int count = ticket_count(t);
    run_chunk(ticket_next(t));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == count && notify) {
      // Taking the lock orders this notify after a waiter's predicate check.
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  std::uint32_t seen = 0;
  t_inside_pool = true;
  auto ready = [&] {
    return stop_.load(std::memory_order_acquire) ||
           ticket_gen(ticket_.load(std::memory_order_acquire)) != seen;
  };
  for (;;) {
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, ready);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = ticket_gen(ticket_.load(std::memory_order_acquire));
    run_chunks(seen, true);
  }
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& fn,
                              int max_chunks) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t limit = std::min(max_chunks > 0 ? max_chunks : num_threads_, kMaxChunks);
  const int chunks = static_cast<int>(std::min<std::int64_t>(limit, (n + grain - 1) / grain));
  if (chunks <= 1 || num_threads_ == 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> dispatch(dispatch_mu_);
  fn_ = &fn;
  n_ = n;
  chunks_ = chunks;
  done_.store(0, std::memory_order_relaxed);
  const std::uint32_t gen = ++generation_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = nullptr;
    ticket_.store((std::uint64_t{gen} << 32) | (static_cast<std::uint64_t>(chunks) << 16),
                  std::memory_order_release);
  }
  start_cv_.notify_all();  // cheap when every worker is spinning (no sleepers)
  t_inside_pool = true;
  run_chunks(gen, false);
  t_inside_pool = false;
  auto done = [&] { return done_.load(std::memory_order_acquire) == chunks; };
  if (!done() && !spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace detinfer::core
