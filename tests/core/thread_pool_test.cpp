#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "detinfer/error.h"

namespace detinfer {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    core::ThreadPool pool(threads);
    for (std::int64_t n : {1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n=" << n;
    }
  }
}

TEST(ThreadPool, PropagatesExceptions) {
  core::ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(100, 1,
                                 [](std::int64_t b, std::int64_t) {
                                   if (b > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int> count{0};
  pool.parallel_for(10, 1, [&](std::int64_t b, std::int64_t e) { count += int(e - b); });
  EXPECT_EQ(count.load(), 10);
}

TEST(ThreadPool, NestedCallsRunSerially) {
  core::ThreadPool pool(3);
  std::atomic<int> count{0};
  pool.parallel_for(6, 1, [&](std::int64_t b, std::int64_t e) {
    pool.parallel_for(e - b, 1, [&](std::int64_t ib, std::int64_t ie) { count += int(ie - ib); });
  });
  EXPECT_EQ(count.load(), 6);
}

// Back-to-back short jobs, as a forward step issues them: workers catch each job while
// still spinning from the previous one, and every job sees every index exactly once.
TEST(ThreadPool, ManyShortJobsBackToBack) {
  for (int threads : {2, 3}) {
    core::ThreadPool pool(threads);
    std::vector<std::int64_t> sums(2000, 0);
    for (std::size_t job = 0; job < sums.size(); ++job) {
      const std::int64_t n = 1 + static_cast<std::int64_t>(job % 17);
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (auto& h : hits) sums[job] += h.load();
      ASSERT_EQ(sums[job], n) << threads << " threads, job " << job;
    }
  }
}

// Pools created and destroyed right after a job (workers may still be spinning).
TEST(ThreadPool, DestroyRightAfterAJob) {
  for (int round = 0; round < 50; ++round) {
    core::ThreadPool pool(2 + round % 3);
    std::atomic<int> count{0};
    pool.parallel_for(8, 1, [&](std::int64_t b, std::int64_t e) { count += int(e - b); });
    ASSERT_EQ(count.load(), 8);
  }
}

// More ranges than threads: every index still exactly once, ranges disjoint and whole.
TEST(ThreadPool, MaxChunksSplitsFinerAndCoversEveryIndex) {
  for (int threads : {2, 3}) {
    core::ThreadPool pool(threads);
    for (int max_chunks : {1, 2, 5, 16, 100000}) {
      for (std::int64_t n : {1, 7, 64, 1001}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        std::atomic<int> calls{0};
        pool.parallel_for(
            n, 1,
            [&](std::int64_t b, std::int64_t e) {
              ++calls;
              for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
            },
            max_chunks);
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n=" << n;
        EXPECT_LE(calls.load(), std::min<std::int64_t>(n, std::min(max_chunks, 0xffff)));
      }
    }
  }
}

// Chunks are claimed, not assigned: while a worker is held inside its first chunk, the
// caller takes every other chunk (with static assignment this would never finish: the
// held worker waits for chunks that only it could run).
TEST(ThreadPool, CallerTakesOverChunksOfABusyWorker) {
  core::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  constexpr int kChunks = 8;
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> by_caller{0};
    std::atomic<int> by_worker{0};
    pool.parallel_for(
        kChunks, 1,
        [&](std::int64_t, std::int64_t) {
          if (std::this_thread::get_id() == caller) {
            ++by_caller;
            return;
          }
          // The worker's chunk ends only once the caller ran all the others.
          if (by_worker.fetch_add(1) == 0) {
            while (by_caller.load() < kChunks - 1) std::this_thread::yield();
          }
        },
        kChunks);
    ASSERT_EQ(by_caller.load() + by_worker.load(), kChunks);
    ASSERT_LE(by_worker.load(), 1);
  }
}

TEST(ThreadPool, RejectsInvalidThreadCounts) {
  EXPECT_THROW(core::ThreadPool(0), Error);
  EXPECT_THROW(core::ThreadPool(-3), Error);
}

}  // namespace
}  // namespace detinfer
