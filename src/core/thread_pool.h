// A small fixed-size thread pool for kernels. It partitions independent work (rows,
// columns, heads) only: results never depend on the number of threads because no
// reduction is ever split across tasks.
#pragma once

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

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::mutex dispatch_mu_;  // one parallel_for at a time
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  // The current job.
  const std::function<void(std::int64_t, std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  int chunks_ = 0;
  std::exception_ptr error_;
};

}  // namespace detinfer
