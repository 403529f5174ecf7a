// A small fixed-size thread pool for kernels. It partitions independent work (rows,
// columns, heads) only: results never depend on the number of threads because no
// reduction is ever split across tasks.
//
// A forward pass issues a few hundred short parallel_for calls per step, so waking
// sleeping workers through the kernel for each would dominate small matrices. Workers
// (and the caller, waiting for them) therefore poll an atomic ticket before they sleep
// on a condition variable, for a budget that adapts: it grows while polling succeeds and
// shrinks when it fails, as it does on a machine with more runnable threads than cores.
// No polling at all when the pool has more threads than the machine has cores.
//
// Chunks are claimed, not assigned: the caller and the workers take the next unclaimed
// chunk from the ticket until none is left, so a worker that is slow to wake (asleep,
// or preempted on a busy machine) does not hold the caller up: the caller runs its
// chunk instead, and waits only for chunks already claimed. Which thread runs a chunk
// never changes a result (chunks are disjoint ranges of independent work).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace detinfer::core {

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 means no worker threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), each at least
  // `grain` long (except possibly the last), and returns when all are done. The first
  // exception thrown by fn is rethrown here. Calls from inside fn run serially.
  // max_chunks (0 = num_threads()) caps the number of ranges; more ranges than threads
  // let a fast thread take over the work of a slow one.
  void parallel_for(std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& fn, int max_chunks = 0);

 private:
  void worker_loop();
  void run_chunk(int index);
  // Claims and runs chunks of job `gen` until none is left. The last chunk to finish
  // wakes the caller when `notify` (workers) and the caller sleeps.
  void run_chunks(std::uint32_t gen, bool notify);
  // Polls pred() up to the current spin budget (adapting it); true when it held.
  template <typename Pred>
  bool spin_until(Pred pred);

  int num_threads_;
  bool spin_ = false;                // false when the pool has more threads than cores
  std::atomic<int> spin_budget_{0};  // polls per wait, adapted (thread_pool.cpp)
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::mutex dispatch_mu_;  // one parallel_for at a time
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // The current job's generation (bits 32..63), chunk count (16..31) and next unclaimed
  // chunk (0..15); published under mu_, claimed by compare-and-swap.
  std::atomic<std::uint64_t> ticket_{0};
  std::uint32_t generation_ = 0;  // of the last job published (dispatcher only)
  std::atomic<int> done_{0};      // chunks of the current job finished
  std::atomic<bool> stop_{false};
  // The current job: written before the ticket is published, read after a claim.
  const std::function<void(std::int64_t, std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  int chunks_ = 0;
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace detinfer::core
