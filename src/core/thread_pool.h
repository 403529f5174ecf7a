// A small fixed-size thread pool for kernels. It partitions independent work (rows,
// columns, heads) only: results never depend on the number of threads because no
// reduction is ever split across tasks.
//
// A forward pass issues a few hundred short parallel_for calls per step, so waking
// sleeping workers through the kernel for each would dominate small matrices. Workers
// (and the caller, waiting for them) therefore poll an atomic generation counter before
// they sleep on a condition variable, for a budget that adapts: it grows while polling
// succeeds and shrinks when it fails, as it does on a machine with more runnable threads
// than cores. No polling at all when the pool has more threads than the machine has
// cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace detinfer {

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
  void parallel_for(std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_chunk(int index);
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
  // Incremented (under mu_) once per job; workers run one chunk per increment.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers that have not finished the current job
  std::atomic<bool> stop_{false};
  // The current job: written before generation_ is incremented, read after.
  const std::function<void(std::int64_t, std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  int chunks_ = 0;
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace detinfer
